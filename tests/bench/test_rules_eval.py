"""bench/code/rules_eval.py: code_quality on the labelled set of real standard-library and package files keeps
its precision and recall (docs/evaluation.md)."""

from __future__ import annotations

from bench.code.rules_eval import evaluate


def test_labelled_real_files_keep_their_precision_and_recall():
    result = evaluate()
    assert result["files"] >= 300 and result["missing"] <= 0.2 * (result["files"] + result["missing"]), result[
        "missing"
    ]
    assert result["precision"] >= 0.99 and result["recall"] >= 0.95, (result["precision"], result["recall"])
    assert result["rules"]["vendored"]["precision"] == 1.0 and result["rules"]["generated:name"]["precision"] == 1.0
