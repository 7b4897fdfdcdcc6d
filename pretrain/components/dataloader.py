"""The streaming loader: this rank's share of every global batch of samples, in a global, seeded order.

Samples come from the token sources (pretrain/components/token_sources.py), with the blocks of the next
steps' samples fetched ahead for sources given as URLs. With ``data.document_mask`` each sample also carries
its tokens' document numbers, and the model attends within documents (pretrain/components/document_bounds.py).
Every batch's ids are checked against the source's vocabulary on the host (an id beyond it would fail in the
model's embedding, late and without naming the shard).

The global order (``MixtureOrder``, pretrain/components/mixture_order.py, with ``data.phases`` if any) is
a function of the sample's global position only, so it does not depend on how many data-parallel ranks
read it: each rank takes its contiguous slice of every global batch, and the loader's whole state is the
number of samples consumed, so a run can resume at any DP size.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from dataprep.core.errors import UsageError
from pretrain.components.mixture_order import MixtureOrder
from pretrain.components.token_sources import Source, open_sources
from pretrain.config.data import DataCacheConfig, DataConfig


class Loader:
    """This rank's share of every global batch, as micro-batches of ``seq_len + 1`` token ids.

    ``state_dict()`` is the number of global samples consumed, the same on every rank. With ``documents``
    each row is (2, seq_len + 1): the token ids and each token's document number."""

    def __init__(
        self,
        sources: list[Source],
        weights: list[float],
        split: str,
        global_batch: int,
        micro_batch: int,
        dp_rank: int = 0,
        dp_size: int = 1,
        seed: int = 0,
        read_ahead_steps: int = 0,
        documents: bool = False,
        phases: list[tuple[int | None, list[float]]] | None = None,
    ):
        if global_batch % (micro_batch * dp_size):
            raise UsageError(
                f"global_batch_size {global_batch} is not a multiple of micro_batch_size {micro_batch} x "
                f"data-parallel size {dp_size}"
            )
        self.sources, self.split = sources, split
        self.global_batch, self.micro_batch = global_batch, micro_batch
        self.dp_rank, self.dp_size = dp_rank, dp_size
        self.documents = documents
        self.order = MixtureOrder([s.num_samples(split) for s in sources], weights, seed, phases)
        self.vocab_size = min(s.vocab_size for s in sources)  # the batch check's bound (per source on a hit)
        self.consumed = 0
        self.remote = any(s.remote for s in sources)
        # remote sources only: steps whose samples worker threads fetch ahead, and how far that reached
        self.read_ahead_steps = read_ahead_steps if self.remote else 0
        self._ahead_until = 0

    @property
    def grad_accum_steps(self) -> int:
        return self.global_batch // (self.micro_batch * self.dp_size)

    def sample(self, position: int) -> np.ndarray:
        s, i = self.order(position)
        tokens = self.sources[s].sample(self.split, i)
        return np.stack([tokens, self.sources[s].document_ids(self.split, i)]) if self.documents else tokens

    def global_positions(self, step_start: int) -> range:
        per_rank = self.global_batch // self.dp_size
        first = step_start + self.dp_rank * per_rank
        return range(first, first + per_rank)

    def batch_at(self, step_start: int) -> list[torch.Tensor]:
        """This rank's micro-batches (micro_batch, seq_len + 1) of the global batch starting at ``step_start``."""
        if self.remote:
            self._prefetch_step(step_start)  # the blocks arrive in parallel; reading them below waits
        rows = np.stack([self.sample(p) for p in self.global_positions(step_start)])
        tokens = rows[:, 0] if self.documents else rows
        if tokens.size and (tokens.max() >= self.vocab_size or tokens.min() < 0):  # on the host: no device sync
            self._raise_out_of_vocab(step_start)
        return list(torch.from_numpy(rows).split(self.micro_batch))

    def _raise_out_of_vocab(self, step_start: int) -> None:
        """Name the first id beyond its own source's vocabulary in this batch (the model's embedding would fail on
        it); none when the batch only mixes sources of different vocabularies."""
        for position in self.global_positions(step_start):
            s, i = self.order(position)
            source = self.sources[s]
            found = source.find_out_of_vocab(self.split, i)
            if found:
                path, offset, token = found
                raise UsageError(
                    f"{path}: token id {token} at token offset {offset} is outside the vocabulary of "
                    f"{source.path} (vocab_size {source.vocab_size}): the shard is corrupt or was made "
                    f"with another tokenizer; run `dataprep verify-shards {source.path}`, then re-tokenize "
                    "or restore that shard"
                )

    def next_step(self) -> list[torch.Tensor]:
        """The micro-batches of the next optimizer step."""
        batch = self.batch_at(self.consumed)
        self._read_ahead()  # fetched while the model trains on this batch
        self.consumed += self.global_batch
        return batch

    def _read_ahead(self) -> None:
        """Queue the samples of the next ``read_ahead_steps`` steps for the remote cache's workers."""
        if not self.read_ahead_steps:
            return
        start = max(self._ahead_until, self.consumed + self.global_batch)
        self._ahead_until = self.consumed + (self.read_ahead_steps + 1) * self.global_batch
        for step_start in range(start, self._ahead_until, self.global_batch):
            self._prefetch_step(step_start)

    def _prefetch_step(self, step_start: int) -> None:
        for position in self.global_positions(step_start):
            s, i = self.order(position)
            self.sources[s].prefetch(self.split, i)

    def skip(self, steps: int) -> None:
        """Pass over the next ``steps`` global batches of the order (a rollback past a loss spike)."""
        self.consumed += steps * self.global_batch

    def state_dict(self) -> dict:
        return {"samples_consumed": self.consumed}

    def load_state_dict(self, state: dict) -> None:
        self.consumed = int(state["samples_consumed"])

    def tokens_drawn(self) -> dict[str, int]:
        """Training tokens drawn from each source so far, all ranks' (every sample trains ``seq_len`` of them),
        by name: the mixture order's counts over the samples consumed, batches passed over at a spike included."""
        return {s.name: int(n) * s.seq_len for s, n in zip(self.sources, self.order.drawn(0, self.consumed))}

    def close(self) -> None:
        """Stop the read-ahead of remote sources (their caches are shared with any other loader on them)."""
        for cache in {id(s.cache): s.cache for s in self.sources if s.cache is not None}.values():
            cache.close()


def warn_if_read_ahead_overflows(cfg: DataCacheConfig, remote: list[Source], seq_len: int, rank_batch: int) -> None:
    """Blocks fetched ahead that the cache cannot hold are evicted before use and fetched twice: say so."""
    if not remote:
        return
    sample_bytes = (seq_len + 1) * max(shard.dtype.itemsize for s in remote for shard in s.train.shards)
    # the blocks a sample usually spans, for the step being read and the steps read ahead
    ahead_bytes = (cfg.read_ahead_steps + 1) * rank_batch * (sample_bytes // cfg.block_bytes + 1) * cfg.block_bytes
    if ahead_bytes > cfg.max_bytes:
        warnings.warn(
            f"data.cache.max_bytes {cfg.max_bytes} may not hold the {cfg.read_ahead_steps + 1} steps read "
            f"ahead (up to {ahead_bytes} bytes): blocks fetched ahead would be evicted before use and "
            "fetched again; raise max_bytes or lower read_ahead_steps or block_bytes"
        )


def phase_ends(cfg: DataConfig, steps: int, global_batch: int) -> list[tuple[int | None, list[float]]] | None:
    """``data.phases`` in samples: each phase ends on a step boundary (the last runs on); None without phases."""
    if not cfg.phases:
        return None
    weights = cfg.phase_weights()
    return [
        (None if i == len(weights) - 1 else round(until * steps) * global_batch, w)
        for i, (until, w) in enumerate(weights)
    ]


def build_loaders(
    cfg: DataConfig,
    seq_len: int,
    global_batch: int,
    micro_batch: int,
    dp_rank: int,
    dp_size: int,
    vocab_size: int | None = None,
    cache_dir: str | None = None,
    steps: int | None = None,
) -> tuple[Loader, Loader | None]:
    """The training loader and, when any source holds validation samples, the validation loader.
    ``cache_dir`` is this process's folder for blocks of sources given as URLs; ``steps``, the run's, places
    ``data.phases``."""
    sources = open_sources(cfg, seq_len, vocab_size, cache_dir, val_samples=global_batch)
    weights = [s.weight for s in cfg.sources]
    ahead = cfg.cache.read_ahead_steps
    warn_if_read_ahead_overflows(cfg.cache, [s for s in sources if s.remote], seq_len, global_batch // dp_size)
    train = Loader(
        sources,
        weights,
        "train",
        global_batch,
        micro_batch,
        dp_rank,
        dp_size,
        cfg.seed,
        ahead,
        cfg.document_mask,
        phase_ends(cfg, steps or 1, global_batch),
    )
    val_idx = [i for i, s in enumerate(sources) if s.num_samples("val") > 0]
    if not val_idx:
        if cfg.val_fraction > 0:
            raise UsageError(
                f"data.val_fraction {cfg.val_fraction:g}: no source is large enough to hold out a "
                f"validation sample of seq_len + 1 = {seq_len + 1} tokens beside its training samples; "
                "add data, lower seq_len, or set data.val_fraction: 0"
            )
        return train, None
    val = Loader(
        [sources[i] for i in val_idx],
        [weights[i] for i in val_idx],
        "val",
        global_batch,
        micro_batch,
        dp_rank,
        dp_size,
        cfg.seed + 1,
        ahead,
        cfg.document_mask,
    )
    return train, val


def fingerprint(loader: Loader) -> dict:
    """What the sample order depends on; compared on resume to warn when the data changed."""
    return {
        "sources": [s.path for s in loader.sources],
        "samples": [s.num_samples(loader.split) for s in loader.sources],
        "counts": loader.order.counts.tolist(),
        **({"phases": [c.tolist() for c in loader.order.phase_counts]} if loader.order.num_phases > 1 else {}),
        "seed": loader.order.seed,
        "seq_len": loader.sources[0].seq_len,
    }
