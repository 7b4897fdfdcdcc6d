"""``manifest.json``: what a token-shard directory holds and how to check it.

It names the tokenizer (SHA-256 of its model), vocabulary size, token dtype, special token ids and,
per shard, documents, tokens, and the size and SHA-256 of both files (names relative to the manifest's
folder). Shards written by the tokenize stage also count ``unique_documents``/``unique_tokens``: the
copies of a rehydrated document (``repeat_by``) are in ``documents``/``tokens`` but counted once there, and
``pipeline_run`` names the pipeline run that wrote them (``dataprep.core.provenance``: config, input listing,
code version; for lineage). It is written last, on the driver, once every shard exists: a directory without it is
unfinished. Readers trust nothing else: files not listed are ignored.
"""

from __future__ import annotations

import json
import os
import time

import fsspec
import numpy as np

from dataprep.core.errors import MissingPath, UsageError
from dataprep.core.storage import atomic_write_text, exists, join_path, read_text

MANIFEST_NAME = "manifest.json"
TOKENIZER_DIR = "tokenizer"  # a copy of the tokenizer, so the folder is self-contained
FORMAT = "megatron-indexed-dataset"
FORMAT_VERSION = 1
_REQUIRED = ("format", "tokenizer", "vocab_size", "dtype", "special_ids", "shards")
_SHARD_KEYS = ("name", "documents", "tokens", "bin_sha256", "idx_sha256")
# Megatron's DType.optimal_dtype: vocabularies below this use uint16, the rest int32.
UINT16_VOCAB_LIMIT = 65_500


def dtype_for_vocab(vocab_size: int) -> np.dtype:
    """The token dtype Megatron picks for a vocabulary: uint16 below 65,500 ids, else int32."""
    return np.dtype(np.uint16) if vocab_size < UINT16_VOCAB_LIMIT else np.dtype(np.int32)


def build_manifest(shards: list[dict], tokenizer: dict, dtype: str, extra: dict | None = None) -> dict:
    """Assemble the manifest from ``write_shard`` results (any order; sorted by name here) and the
    tokenizer description (``Tokenizer.describe()``)."""
    shards = sorted(shards, key=lambda s: s["name"])
    names = [s["name"] for s in shards]
    if len(set(names)) != len(names):
        raise UsageError("duplicate shard names: " + ", ".join(sorted({n for n in names if names.count(n) > 1})))
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tokenizer": tokenizer,
        "vocab_size": tokenizer["vocab_size"],
        "dtype": dtype,
        "special_ids": tokenizer["special_ids"],
        "documents": sum(s["documents"] for s in shards),
        "tokens": sum(s["tokens"] for s in shards),
        **_unique_counts(shards),
        "num_shards": len(shards),
        "shards": shards,
        **(extra or {}),
    }


def _unique_counts(shards: list[dict]) -> dict:
    """Documents and tokens counted once however many copies rehydration wrote (only when every
    shard says; shards indexed from elsewhere do not)."""
    if not shards or not all("unique_tokens" in s for s in shards):
        return {}
    return {
        "unique_documents": sum(s["unique_documents"] for s in shards),
        "unique_tokens": sum(s["unique_tokens"] for s in shards),
    }


def write_manifest(directory: str, manifest: dict) -> str:
    path = join_path(directory, MANIFEST_NAME)
    atomic_write_text(path, json.dumps(manifest, indent=2) + "\n")
    return path


def begin_dataset(directory: str) -> None:
    """Before (re)writing shards: remove an old manifest so a half-rewritten folder never looks complete."""
    path = join_path(directory, MANIFEST_NAME)
    if exists(path):
        fs, _, (local,) = fsspec.get_fs_token_paths(path)
        fs.rm(local)


def finish_dataset(directory: str, shards: list[dict], tokenizer, prefix: str, extra: dict | None = None) -> dict:
    """After every shard exists: save the tokenizer beside the shards, delete shard files (named
    ``prefix``...) this run did not write (left by an earlier run with other partitioning, or temporaries
    of a crashed task; other files in the folder are not the stage's to delete), then write the
    manifest, last."""
    manifest = build_manifest(shards, tokenizer.describe(), dtype_for_vocab(tokenizer.vocab_size).name, extra)
    tokenizer.save(join_path(directory, TOKENIZER_DIR))
    keep = {s["name"] + ext for s in shards for ext in (".bin", ".idx")}
    fs, _, (root,) = fsspec.get_fs_token_paths(directory)
    for path in fs.ls(root, detail=False):
        name = os.path.basename(path.rstrip("/"))
        if (
            name.startswith(prefix)
            and name.endswith((".bin", ".idx"))
            and name not in keep
            or name.startswith(f".tmp-{prefix}")
        ):
            fs.rm(path)
    write_manifest(directory, manifest)
    return manifest


def load_manifest(directory: str) -> dict:
    """Read and sanity-check ``directory/manifest.json``; errors name the directory and the problem."""
    path = join_path(directory, MANIFEST_NAME)
    if not exists(path):
        raise MissingPath(f"{path} not found: not a token-shard directory, or its tokenize step did not finish")
    return parse_manifest(path, read_text(path))


def parse_manifest(path: str, text: str) -> dict:
    """The manifest in ``text`` (read from ``path``, which errors name), checked for its required keys."""
    try:
        manifest = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path} is not valid JSON: {exc}") from None
    missing = [k for k in _REQUIRED if k not in manifest]
    if missing:
        raise UsageError(f"{path} lacks {', '.join(missing)}")
    if manifest["format"] != FORMAT:
        raise UsageError(f"{path}: format {manifest['format']!r}, expected {FORMAT!r}")
    for i, shard in enumerate(manifest["shards"]):
        lacking = [k for k in _SHARD_KEYS if k not in shard]
        if lacking:
            raise UsageError(f"{path}: shards[{i}] lacks {', '.join(lacking)}")
    return manifest
