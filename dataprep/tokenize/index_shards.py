"""Write ``manifest.json`` for Megatron ``.bin``/``.idx`` shards made
elsewhere (megatron-core's ``preprocess_data.py``, another pipeline), so ``pretrain train``, ``budget
--data`` and ``verify-shards`` can use them.

Every pair is opened and validated (header, sizes, pointers), hashed, and its largest token id checked
against ``--vocab-size`` (a negative or larger one names the shard and its offset). The manifest names the tokenizer by
the hash of ``--tokenizer`` (a ``tokenizer.json`` or SentencePiece model) when given.
"""

from __future__ import annotations

import os

import numpy as np

from dataprep.core.errors import MissingPath, UsageError
from dataprep.tokenize.manifest import build_manifest, dtype_for_vocab, write_manifest
from dataprep.tokenize.shards import IndexedShard
from dataprep.tokenize.verify import file_sha256, scan_bin


def index_shards(
    directory: str, vocab_size: int, eos: int, bos: int | None = None, tokenizer: str | None = None
) -> dict:
    """Validate every shard pair in ``directory`` and write its manifest; returns the manifest."""
    if not os.path.isdir(directory):
        raise MissingPath(f"{directory}: not a folder (give the folder of .idx/.bin shard pairs)")
    names = sorted(f[:-4] for f in os.listdir(directory) if f.endswith(".idx") and not f.startswith(".tmp-"))
    if not names:
        raise MissingPath(f"{directory}: no .idx/.bin shard pairs")
    shards, dtypes = [], set()
    for name in names:
        shard = IndexedShard(os.path.join(directory, name))
        prefix = os.path.join(directory, name)
        bin_sha256, found = scan_bin(prefix + ".bin", shard.dtype, vocab_size)
        if found:
            raise UsageError(
                f"shard {name}: token id {found[1]} at token offset {found[0]} of {name}.bin is not below "
                f"--vocab-size {vocab_size}: give the vocabulary size of the tokenizer the shards were made with"
            )
        dtypes.add(str(shard.dtype))
        shards.append(
            {
                "name": name,
                "documents": shard.num_docs,
                "tokens": shard.num_tokens,
                "bin_bytes": os.path.getsize(prefix + ".bin"),
                "idx_bytes": os.path.getsize(prefix + ".idx"),
                "bin_sha256": bin_sha256,
                "idx_sha256": file_sha256(prefix + ".idx"),
            }
        )
    if len(dtypes) > 1:
        raise UsageError(f"{directory}: shards use different token dtypes ({', '.join(sorted(dtypes))})")
    special = {"eos": eos, **({"bos": bos} if bos is not None else {})}
    for key, value in special.items():
        if not 0 <= value < vocab_size:
            raise UsageError(f"--{key} {value} is not a token id below --vocab-size {vocab_size}")
    described = {
        "type": "external",
        "vocab_size": vocab_size,
        "special_ids": special,
        "model_sha256": file_sha256(tokenizer) if tokenizer else None,
        "source": os.path.basename(tokenizer) if tokenizer else None,
    }
    (dtype,) = dtypes
    if np.dtype(dtype).itemsize < dtype_for_vocab(vocab_size).itemsize:
        raise UsageError(f"{directory}: {dtype} tokens cannot hold a vocabulary of {vocab_size}")
    manifest = build_manifest(shards, described, dtype, {"add_bos": False, "imported": True})
    write_manifest(directory, manifest)
    return manifest
