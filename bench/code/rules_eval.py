"""Precision and recall of ``code_quality`` drops on tests/data/code_labels.jsonl: real files of the
standard library and the venv's packages, read where they are installed (files whose sha256 differs
from the label's are skipped and counted). ``python -m bench.code.rules_eval [--errors]``
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import sysconfig
from collections import Counter
from pathlib import Path

from dataprep.code.rules import CodeQuality

LABELS = Path(__file__).resolve().parents[2] / "tests" / "data" / "code_labels.jsonl"
ROOTS = {"stdlib": sysconfig.get_paths()["stdlib"], "site": sysconfig.get_paths()["purelib"]}


def labelled_files(path: Path = LABELS):
    """(label row, text) for each labelled file found unchanged; and how many were missing or changed."""
    found, missing = [], 0
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if "label" not in row:
            continue
        full = os.path.join(ROOTS[row["root"]], row["path"])
        try:
            data = Path(full).read_bytes()
        except OSError:
            missing += 1
            continue
        if hashlib.sha256(data).hexdigest() != row["sha256"]:
            missing += 1
            continue
        found.append((row, data.decode("utf-8", errors="replace")))
    return found, missing


def evaluate(stage: CodeQuality | None = None, path: Path = LABELS) -> dict:
    stage = stage or CodeQuality()
    files, missing = labelled_files(path)
    by_rule, caught, wanted, errors = Counter(), Counter(), Counter(), []
    tp = fp = fn = 0
    correct_by_rule = Counter()
    for row, text in files:
        reason = stage.decide(text, row["path"], None)
        drop = row["label"] == "drop"
        if drop:
            wanted[row["why"]] += 1
            caught[row["why"]] += reason is not None
        if reason is not None:
            by_rule[reason] += 1
            correct_by_rule[reason] += drop
        tp += drop and reason is not None
        fp += (not drop) and reason is not None
        fn += drop and reason is None
        if drop != (reason is not None):
            errors.append((row["label"], reason, row["root"], row["path"]))
    return {
        "files": len(files),
        "missing": missing,
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "recall": tp / (tp + fn) if tp + fn else 1.0,
        "rules": {r: {"drops": n, "precision": correct_by_rule[r] / n} for r, n in sorted(by_rule.items())},
        "recall_by_kind": {k: caught[k] / n for k, n in sorted(wanted.items())},
        "errors": errors,
    }


if __name__ == "__main__":
    result = evaluate()
    print(
        f"files {result['files']} (missing or changed {result['missing']}): precision "
        f"{result['precision']:.3f} recall {result['recall']:.3f}"
    )
    for rule, s in result["rules"].items():
        print(f"  rule {rule:32} drops {s['drops']:4}  precision {s['precision']:.3f}")
    for kind, rec in result["recall_by_kind"].items():
        print(f"  recall {kind:44} {rec:.3f}")
    if "--errors" in sys.argv:
        for e in result["errors"]:
            print("  ", *e)
