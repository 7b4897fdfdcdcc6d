"""Precision and recall of the PII detectors per type on tests/data/pii_labelled.jsonl.

The set holds multilingual lines with labelled PII and hard negatives (dates, times, versions, prices,
ISBNs, order numbers, digit runs failing checksums). A prediction counts as correct when it overlaps a
labelled span of the same type; "exact" says how many of those also have the labelled boundaries.
Targets: recall >= 0.99 and precision >= 0.97 per type.

    python -m bench.safety.pii_eval [--errors]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from bench.common.paths import ROOT
from dataprep.safety.pii import ALL_TYPES, find_pii

DEFAULT_SET = ROOT / "tests" / "data" / "pii_labelled.jsonl"


def load(path: Path = DEFAULT_SET) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if "text" in r]


def evaluate(rows: list[dict]) -> tuple[dict[str, dict], list[str]]:
    """Per type: tp, fp, fn, exact, precision, recall; plus a list of readable errors."""
    tp, fp, fn, exact = Counter(), Counter(), Counter(), Counter()
    errors = []
    for row in rows:
        text = row["text"]
        gold = []
        for item in row["pii"]:
            start = text.index(item["value"])
            gold.append((start, start + len(item["value"]), item["type"]))
        predicted = [(s.start, s.end, s.type) for s in find_pii(text)]
        matched = set()
        for p in predicted:
            hit = next((g for g in gold if g[2] == p[2] and p[0] < g[1] and g[0] < p[1] and g not in matched), None)
            if hit:
                tp[p[2]] += 1
                exact[p[2]] += hit[:2] == p[:2]
                matched.add(hit)
            else:
                fp[p[2]] += 1
                errors.append(f"FP {p[2]:<12} {text[p[0] : p[1]]!r:<32} in {text!r}")
        for g in gold:
            if g not in matched:
                fn[g[2]] += 1
                errors.append(f"FN {g[2]:<12} {text[g[0] : g[1]]!r:<32} in {text!r}")
    report = {}
    for t in ALL_TYPES:
        predicted, labelled = tp[t] + fp[t], tp[t] + fn[t]
        report[t] = {
            "tp": tp[t], "fp": fp[t], "fn": fn[t], "exact": exact[t],
            "precision": tp[t] / predicted if predicted else 1.0,
            "recall": tp[t] / labelled if labelled else 1.0,
        }  # fmt: skip
    return report, errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", type=Path, default=DEFAULT_SET)
    parser.add_argument("--errors", action="store_true", help="print every false positive and negative")
    args = parser.parse_args()
    rows = load(args.set)
    report, errors = evaluate(rows)
    print(f"{len(rows)} lines, {sum(len(r['pii']) for r in rows)} labelled spans")
    print(f"{'type':<12}{'labelled':>9}{'tp':>5}{'fp':>5}{'fn':>5}{'exact':>7}{'precision':>11}{'recall':>8}")
    for t, r in report.items():
        print(
            f"{t:<12}{r['tp'] + r['fn']:>9}{r['tp']:>5}{r['fp']:>5}{r['fn']:>5}{r['exact']:>7}"
            f"{r['precision']:>11.3f}{r['recall']:>8.3f}"
        )
    if args.errors:
        print("\n".join(errors))


if __name__ == "__main__":
    main()
