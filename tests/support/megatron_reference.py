"""Megatron-LM's own indexed-dataset reader, the reference the shard tests compare our files with."""

from __future__ import annotations

import warnings


def megatron_indexed_dataset():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets import indexed_dataset
    return indexed_dataset
