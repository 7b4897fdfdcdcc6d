"""Precision and recall of ``code_secrets`` on tests/data/secrets_labelled.jsonl, per type.

A planted secret counts as found when a span of its type covers exactly its value; any other span is a
false positive (a look-alike redacted). ``python -m bench.code.secrets_eval``
"""

from __future__ import annotations

import json
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
        scores[t] = {"precision": a / (a + b) if a + b else 1.0, "recall": a / (a + c) if a + c else 1.0, "tp": a, "fp": b, "fn": c}
    return scores


if __name__ == "__main__":
    for t, s in evaluate().items():
        print(f"{t:14} precision {s['precision']:.3f} recall {s['recall']:.3f}  (tp {s['tp']}, fp {s['fp']}, fn {s['fn']})")
