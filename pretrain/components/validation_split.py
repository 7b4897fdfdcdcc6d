"""The split of each source's documents into training and validation, seeded per shard so it never changes.

Every document gets one uniform draw, seeded by the seed and its shard's name; those below ``val_fraction``
are held out. A small source holds out at least one validation batch (``hold_out``).
"""

from __future__ import annotations

import sys
import zlib

import numpy as np


def _draws(shard, seed: int) -> np.ndarray:
    """One uniform draw per document, seeded by the shard's name, so the split is stable."""
    return np.random.default_rng([seed, zlib.crc32(shard.name.encode())]).random(shard.num_docs)


def split_documents(shard, val_fraction: float, seed: int) -> np.ndarray:
    """True for the documents held out for validation; seeded by the shard's name, so it is stable."""
    return _draws(shard, seed) < val_fraction


def hold_out(path: str, shards: list, val_fraction: float, seed: int, min_tokens: int) -> list[np.ndarray]:
    """Each shard's held-out documents: those ``split_documents`` picks or, when they hold fewer than
    ``min_tokens`` (a small corpus), also the next ones in draw order until they do, but at most half of the
    tokens; said in one line, since the user asked for a smaller share."""
    draws = [_draws(s, seed) for s in shards]
    held = [d < val_fraction for d in draws]
    lengths = [np.diff(np.asarray(s.doc_offsets, dtype=np.int64)) for s in shards]
    tokens = sum(int(n[h].sum()) for n, h in zip(lengths, held))
    if val_fraction == 0 or tokens >= min_tokens or not shards:
        return held
    u, n = np.concatenate(draws), np.concatenate(lengths)
    order = np.argsort(u, kind="stable")
    cum = np.cumsum(n[order])
    k = min(int(np.searchsorted(cum, min_tokens)), int(np.searchsorted(cum, cum[-1] // 2, side="right")) - 1)
    if k < 0:
        return held
    held = [h | (d <= u[order[k]]) for h, d in zip(held, draws)]
    now = sum(int(n[h].sum()) for n, h in zip(lengths, held))
    print(
        f"[data] {path}: val_fraction {val_fraction:g} holds out {tokens:,} tokens, fewer than one validation "
        f"batch ({min_tokens:,}); holding out {sum(int(h.sum()) for h in held)} documents ({now:,} tokens, "
        f"{now / max(int(cum[-1]), 1):.0%}) instead",
        file=sys.stderr,
    )
    return held
