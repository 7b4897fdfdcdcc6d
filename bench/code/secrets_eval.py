"""Precision and recall of ``code_secrets`` on tests/data/secrets_labelled.jsonl, per type.

A planted secret counts as found when a span of its type covers exactly its value; any other span is a
false positive (a look-alike redacted). ``python -m bench.code.secrets_eval``

``--detect-secrets`` also scores Yelp's detect-secrets (``pip install detect-secrets``; its default
plugins and filters, each case scanned as a file with ``--suffix``) beside ours, by value alone: its
types are not ours, so a value found counts whatever its type.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections import Counter
from pathlib import Path

from dataprep.code.secrets import find_secrets

LABELS = Path(__file__).resolve().parents[2] / "tests" / "data" / "secrets_labelled.jsonl"
SAME = {"connection_string": "password"}  # a connection string's password is labelled as a password


def evaluate(path: Path = LABELS) -> dict[str, dict[str, float]]:
    tp, fp, fn = Counter(), Counter(), Counter()
    for line in path.read_text().splitlines():
        case = json.loads(line)
        if "text" not in case:
            continue
        found = {(SAME.get(s.type, s.type), case["text"][s.start : s.end]) for s in find_secrets(case["text"])}
        wanted = {(s["type"], s["value"]) for s in case["secrets"]}
        for t, _ in found & wanted:
            tp[t] += 1
        for t, _ in found - wanted:
            fp[t] += 1
        for t, _ in wanted - found:
            fn[t] += 1
    scores = {}
    for t in sorted(set(tp) | set(fp) | set(fn)) + ["all"]:
        a, b, c = (sum(x.values()) for x in (tp, fp, fn)) if t == "all" else (tp[t], fp[t], fn[t])
        scores[t] = {
            "precision": a / (a + b) if a + b else 1.0,
            "recall": a / (a + c) if a + c else 1.0,
            "tp": a,
            "fp": b,
            "fn": c,
        }
    return scores


def _cases(path: Path) -> list[dict]:
    return [case for case in map(json.loads, path.read_text().splitlines()) if "text" in case]


def detect_secrets_values(texts: list[str], suffix: str) -> list[set[str]]:
    """The values detect-secrets reports in each text, scanned as a file of its own."""
    try:
        from detect_secrets import SecretsCollection
        from detect_secrets.settings import default_settings
    except ImportError:
        raise SystemExit("--detect-secrets needs the package: pip install detect-secrets") from None

    found = []
    with tempfile.TemporaryDirectory() as folder, default_settings():
        for i, text in enumerate(texts):
            file = os.path.join(folder, f"case{i}{suffix}")
            Path(file).write_text(text + "\n")
            collection = SecretsCollection()
            collection.scan_file(file)
            found.append({secret.secret_value for _, secret in collection if secret.secret_value})
    return found


def by_value(cases: list[dict], found: list[set[str]]) -> dict:
    """Precision and recall over values, types ignored."""
    tp = fp = fn = 0
    for case, values in zip(cases, found):
        wanted = {s["value"] for s in case["secrets"]}
        tp, fp, fn = tp + len(values & wanted), fp + len(values - wanted), fn + len(wanted - values)
    return {
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "recall": tp / (tp + fn) if tp + fn else 1.0,
        "tp": tp,
        "fp": fp,
        "fn": fn,
    }


def by_line(cases: list[dict], found: list[set[str]]) -> dict:
    """Lines flagged: recall over the lines holding a secret, false alarms over the look-alike lines (what a
    detector that only points at lines is good for; a redactor needs the values)."""
    secret = [bool(case["secrets"]) for case in cases]
    flagged = [bool(values) for values in found]
    hits = sum(s and f for s, f in zip(secret, flagged))
    alarms = sum(f and not s for s, f in zip(secret, flagged))
    return {"recall": hits / max(sum(secret), 1), "false_alarm": alarms / max(len(cases) - sum(secret), 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--detect-secrets", action="store_true", help="score detect-secrets beside code_secrets, by value")
    ap.add_argument("--suffix", default=".py", help="file name suffix detect-secrets sees for each case")
    args = ap.parse_args()
    for t, s in evaluate().items():
        print(
            f"{t:14} precision {s['precision']:.3f} recall {s['recall']:.3f}  (tp {s['tp']}, fp {s['fp']}, "
            f"fn {s['fn']})"
        )
    if args.detect_secrets:
        cases = _cases(LABELS)
        ours = [{case["text"][s.start : s.end] for s in find_secrets(case["text"])} for case in cases]
        for name, found in (
            ("code_secrets", ours),
            ("detect-secrets", detect_secrets_values([c["text"] for c in cases], args.suffix)),
        ):
            s, lines = by_value(cases, found), by_line(cases, found)
            print(
                f"{name:14} by value: precision {s['precision']:.3f} recall {s['recall']:.3f}  (tp "
                f"{s['tp']}, fp {s['fp']}, fn {s['fn']}); "
                f"by line: recall {lines['recall']:.3f}, look-alikes flagged {lines['false_alarm']:.3f}"
            )


if __name__ == "__main__":
    main()
