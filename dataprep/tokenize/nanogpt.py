"""Export shards to nanoGPT's format: ``train.bin`` and ``val.bin``, each one flat ``uint16`` array.

nanoGPT's ``train.py`` memory-maps these with ``np.memmap(path, dtype=np.uint16)``; documents are
simply concatenated (ours already end with EOS). The last ``val_fraction`` of documents, in manifest
order, go to ``val.bin``. The command: ``dataprep export-nanogpt SHARD_DIR --output DIR``.
"""

from __future__ import annotations

import math
import os

import numpy as np

from dataprep.core.errors import UsageError
from dataprep.core.storage import atomic_output
from dataprep.tokenize.shards import load_manifest, open_dataset

UINT16_IDS = 65_536


def export_nanogpt(directory: str, out_dir: str, val_fraction: float = 0.0005) -> dict:
    """Write ``out_dir/train.bin`` and ``out_dir/val.bin``; returns their token counts."""
    manifest = load_manifest(directory)
    if manifest["vocab_size"] > UINT16_IDS:
        raise UsageError(f"nanoGPT's .bin is uint16; vocabulary {manifest['vocab_size']} has ids that do not fit")
    if not 0 <= val_fraction < 1:
        raise UsageError("val_fraction must be in [0, 1)")
    shards = open_dataset(directory)
    total = sum(s.num_docs for s in shards)
    n_val = min(total - 1, math.ceil(total * val_fraction)) if total > 1 else 0
    n_train = total - n_val
    counts = {"train": 0, "val": 0}
    with (
        atomic_output(os.path.join(out_dir, "train.bin")) as train_tmp,
        atomic_output(os.path.join(out_dir, "val.bin")) as val_tmp,
    ):
        with open(train_tmp, "wb") as train, open(val_tmp, "wb") as val:
            seen = 0
            for shard in shards:
                split = min(max(n_train - seen, 0), shard.num_docs)  # documents of this shard that go to train
                cut = int(shard.doc_offsets[split])
                train.write(np.asarray(shard.tokens[:cut], dtype="<u2").tobytes())
                val.write(np.asarray(shard.tokens[cut:], dtype="<u2").tobytes())
                counts["train"] += cut
                counts["val"] += shard.num_tokens - cut
                seen += shard.num_docs
    return {"train_tokens": counts["train"], "val_tokens": counts["val"], "val_documents": n_val}
