"""A tiny model trained on real text with a real tokenizer and shards, for the export, generation and
CUDA tests."""

from __future__ import annotations

import importlib.util
import os

import pytest

from dataprep.tokenize.stage import Tokenize
from dataprep.tokenize.tokenizer import train_tokenizer
from pretrain.config.loading import load_train_config
from pretrain.train import run
from tokenizer_texts import load_texts, texts_table
from train_fixtures import tiny_config


def require(module: str):
    """Import an optional dependency: skip without it, except in CI where the hf extra is installed."""
    if os.environ.get("CI"):
        return importlib.import_module(module)
    return pytest.importorskip(module)


def make_text_run(shared_data, root, steps: int = 4, add_bos: bool = False, train: dict | None = None, **model) -> dict:
    """Tokenizer trained on real multilingual text, token shards, and a tiny model trained ``steps`` steps
    (vocab padded beyond the tokenizer's, grouped-query attention); ``train``: more training config keys
    (device, precision)."""
    tokenizer, shards, held_out = make_text_shards(shared_data, root, add_bos)
    cfg = tiny_config(
        shards,
        root / "run",
        model={"vocab_size": 1024, **model},
        max_steps=steps,
        checkpoint={"every_steps": steps},
        log={"val_every_steps": steps, "val_batches": 2},
        **(train or {}),
    )
    run(load_train_config(cfg))
    return {"tokenizer": tokenizer, "shards": shards, "run": str(root / "run"), "held_out": held_out}


def make_text_shards(shared_data, root, add_bos: bool = False):
    """A tokenizer (vocabulary 1000) trained on real multilingual text, that text as token shards, and
    held-out texts: (tokenizer, shard folder, held-out texts)."""
    lingua, docs = load_texts(shared_data)
    texts = [r["text"] for r in lingua if r["line"] % 4] + docs[::2]
    held_out = [r["text"] for r in lingua if r["line"] % 4 == 0] + docs[1::2]
    tok_dir, shards = str(root / "tokenizer"), str(root / "tokens")
    tokenizer = train_tokenizer(texts, tok_dir, vocab_size=1000, character_coverage=0.98, seed=1)
    Tokenize(tokenizer=tok_dir, output_dir=shards, add_bos=add_bos).run_local(texts_table(texts))
    return tokenizer, shards, held_out
