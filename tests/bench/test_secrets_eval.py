"""bench/code/secrets_eval.py: code_secrets on the labelled set finds every secret and nothing else."""

from __future__ import annotations

from bench.code.secrets_eval import evaluate


def test_labelled_secrets_keep_their_precision_and_recall():
    scores = evaluate()
    assert scores["all"]["tp"] + scores["all"]["fn"] >= 70
    assert scores["all"]["recall"] == 1.0 and scores["all"]["precision"] == 1.0, scores["all"]
