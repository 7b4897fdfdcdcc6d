"""A packed window of three documents and the per-token losses each gives alone and packed: the document
mask's tests, on one process, under FSDP x TP and under pipeline parallelism."""

from __future__ import annotations

import os

import numpy as np
import torch

from pretrain.components.dataloader import Loader
from pretrain.components.token_sources import Source
from pretrain.models.llama import Llama
from train_fixtures import make_token_dataset


def packed_window(directory) -> tuple[Source, list[np.ndarray]]:
    """One source of three documents whose single training sample is exactly the three of them."""
    if not os.path.exists(os.path.join(directory, "manifest.json")):  # parallel workers: made beforehand
        make_token_dataset(directory, n_docs=3, n_shards=1, seed=3, min_len=20, max_len=40)
    source = Source.open(str(directory), seq_len=1, val_fraction=0.0, seed=0)
    docs = [np.asarray(source.train.shards[0].doc(i), dtype=np.int64) for i in range(3)]
    return Source.open(str(directory), sum(map(len, docs)) - 1, 0.0, 0), docs


def per_token_losses(model: Llama, tokens: torch.Tensor, documents: torch.Tensor | None = None) -> torch.Tensor:
    logits = model(tokens[None, :-1], None if documents is None else documents[None, :-1])
    return torch.nn.functional.cross_entropy(logits[0].float(), tokens[1:], reduction="none")


def alone_losses(model: Llama, docs: list[np.ndarray]) -> torch.Tensor:
    """Each document's own per-token losses, one document at a time, concatenated."""
    return torch.cat([per_token_losses(model, torch.from_numpy(doc)) for doc in docs])


def packed_losses(model: Llama, source: Source, docs: list[np.ndarray]) -> torch.Tensor:
    """The packed window's per-token losses, through the loader, at the predictions ``alone_losses`` makes
    (the one prediction that crosses into the next document has no counterpart alone)."""
    row = packed_row(source)
    return within_documents(per_token_losses(model, row[0], row[1]), docs)


def packed_row(source: Source) -> torch.Tensor:
    """The window's one sample through the loader: (2, tokens), the ids and each token's document."""
    return Loader([source], [1.0], "train", 1, 1, documents=True).batch_at(0)[0][0]


def within_documents(packed: torch.Tensor, docs: list[np.ndarray]) -> torch.Tensor:
    """The packed window's per-token losses at the predictions ``alone_losses`` makes."""
    starts = np.cumsum([0] + [len(d) for d in docs])
    return torch.cat([packed[a : b - 1] for a, b in zip(starts[:-1], starts[1:])])


def alone_and_packed(model: Llama, source: Source, docs: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    return alone_losses(model, docs), packed_losses(model, source, docs)
