"""Token shards as a Hugging Face ``datasets.IterableDataset`` of ``{"input_ids": [...]}`` rows.

Shards are the dataset's natural units: ``datasets`` splits them across DataLoader workers and
``.shuffle(seed, buffer_size)`` shuffles their order as well as documents within a buffer.
``datasets`` comes with ``ccpretrain[hf]``; nothing else here needs it.
"""

from __future__ import annotations

import os
from typing import Iterator

from dataprep.tokenize.shards import IndexedShard, open_dataset


def iterable_dataset(directory: str):
    """An IterableDataset over every document of the shard directory, in manifest order, for a training loop
    built on Hugging Face (``Trainer``, ``accelerate``) rather than ``pretrain train``."""
    try:
        import datasets
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            "token shards as a Hugging Face dataset need `pip install 'ccpretrain[hf]'`", name="datasets"
        ) from None
    shards = open_dataset(directory)  # validates every shard against the manifest up front
    features = datasets.Features(
        {"input_ids": datasets.Sequence(datasets.Value(str(shards[0].dtype) if shards else "int32"))}
    )
    prefixes = [os.path.abspath(s.prefix) for s in shards]
    return datasets.IterableDataset.from_generator(_documents, features=features, gen_kwargs={"prefixes": prefixes})


def _documents(prefixes: list[str]) -> Iterator[dict]:
    for prefix in prefixes:
        for doc in IndexedShard(prefix):
            yield {"input_ids": doc.tolist()}
