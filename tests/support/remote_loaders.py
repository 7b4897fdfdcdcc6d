"""Loaders over token shards read from a URL, shared by the remote-shard tests (HTTP and S3): every
data-parallel rank's training loader and the global batch of the next step."""

from __future__ import annotations

import numpy as np

from pretrain.components.dataloader import build_loaders
from pretrain.config.data import DataConfig

SEQ, GLOBAL, MICRO = 16, 8, 2


def remote_data_config(path: str, **cache) -> DataConfig:
    cache = {"block_bytes": 512, "max_bytes": 8192, "read_ahead_steps": 1, "workers": 4, "backoff_s": 0.0, **cache}
    return DataConfig(sources=[{"path": path}], val_fraction=0.1, cache=cache)


def rank_loaders(path: str, cache_dir, dp_size: int = 1, **cache):
    """The training loader of every data-parallel rank (and rank 0's validation loader)."""
    built = [
        build_loaders(
            remote_data_config(path, **cache), SEQ, GLOBAL, MICRO, rank, dp_size, cache_dir=str(cache_dir / f"r{rank}")
        )
        for rank in range(dp_size)
    ]
    return [train for train, _ in built], built[0][1]


def global_batch(loaders) -> np.ndarray:
    """The next step's global batch: every rank's micro-batches, in rank order."""
    return np.concatenate([np.concatenate([m.numpy() for m in loader.next_step()]) for loader in loaders])
