"""Tiny token datasets and training configs shared by the pretraining tests (and bench/train/bench_train.py).

Imported as ``from train_fixtures import ...`` (pytest, and torchrun running a test file, put tests/ on
sys.path); the bench, run from the repository root, imports ``tests.support.train_fixtures``.
"""

from __future__ import annotations

import numpy as np

from dataprep.tokenize.manifest import build_manifest, write_manifest
from dataprep.tokenize.shards import open_dataset, write_shard

VOCAB = 128


def make_token_dataset(
    directory,
    n_docs: int = 120,
    seed: int = 0,
    n_shards: int = 2,
    vocab: int = VOCAB,
    min_len: int = 3,
    max_len: int = 120,
) -> str:
    """Write ``n_docs`` random documents as shards plus manifest; every document ends with eos (0).
    Tokens follow a fixed random bigram table, so a model can actually learn something."""
    rng = np.random.default_rng(seed)
    table = np.random.default_rng(1234).integers(1, vocab, size=(vocab, 4))
    docs = []
    for _ in range(n_docs):
        n = int(rng.integers(min_len, max_len))
        doc = np.empty(n, dtype=np.int64)
        doc[0] = rng.integers(1, vocab)
        choice = rng.integers(0, 4, size=n)
        for i in range(1, n - 1):
            doc[i] = table[doc[i - 1], choice[i]]
        doc[-1] = 0
        docs.append(doc)
    per = -(-n_docs // n_shards)
    shards = [
        write_shard(f"{directory}/part-{i:05d}", docs[i * per : (i + 1) * per], np.uint16) for i in range(n_shards)
    ]
    write_manifest(str(directory), build_manifest(shards, {"vocab_size": vocab, "special_ids": {"eos": 0}}, "uint16"))
    return str(directory)


def tiny_config(data_dirs, out_dir, **overrides) -> dict:
    """A training config dict for a model of a few thousand parameters (fast on 2 CPU cores)."""
    data_dirs = data_dirs if isinstance(data_dirs, (list, tuple)) else [data_dirs]
    cfg = {
        "model": {
            "vocab_size": VOCAB,
            "d_model": 32,
            "n_layers": 2,
            "n_heads": 4,
            "n_kv_heads": 2,
            "ffn_dim": 64,
            "max_seq_len": 64,
        },
        "data": {"sources": [{"path": str(d)} for d in data_dirs], "val_fraction": 0.1},
        "seq_len": 16,
        "micro_batch_size": 2,
        "global_batch_size": 8,
        "max_steps": 6,
        "optim": {"lr": 3e-3, "warmup_steps": 2},
        "checkpoint": {"every_steps": 3, "keep_last": 2},
        "log": {"every_steps": 1, "val_every_steps": 3, "val_batches": 1},
        "out_dir": str(out_dir),
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key] = {**cfg[key], **value}
        else:
            cfg[key] = value
    return cfg


def test_fixture_dataset_is_valid(tmp_path):
    make_token_dataset(tmp_path, n_docs=10, n_shards=2)
    shards = open_dataset(str(tmp_path))
    assert sum(s.num_docs for s in shards) == 10
    assert all(int(s.doc(i)[-1]) == 0 for s in shards for i in range(s.num_docs))
