"""Streaming loader over token shards: fixed-length samples in a global, seeded order.

Each source (a token-shard directory) is split by documents into a training and a validation part
(seeded per shard, so the split never changes; a small source holds out at least one validation batch,
``hold_out``). Each part is the concatenation of its documents;
sample ``i`` is tokens ``[i*seq_len, i*seq_len + seq_len + 1)`` of it, read from the memory maps (never
the corpus in RAM), or for a source given as a URL through a local block cache (``remote_shards``), with
the blocks of the next steps' samples fetched ahead. Samples therefore cross document boundaries, as in
GPT/Megatron pretraining; with ``data.document_mask`` each sample also carries its tokens' document
numbers, and the model attends within documents (pretrain/components/document_bounds.py). Every batch's
ids are checked against the source's vocabulary on the host (an id beyond it would fail in the model's
embedding, late and without naming the shard).

The global order (``MixtureOrder``, pretrain/components/mixture_order.py, with ``data.phases`` if any) is
a function of the sample's global position only, so it does not depend on how many data-parallel ranks
read it: each rank takes its contiguous slice of every global batch, and the loader's whole state is the
number of samples consumed, so a run can resume at any DP size.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import warnings
import zlib
from dataclasses import dataclass

import numpy as np
import torch

from dataprep.core.errors import MissingPath, UsageError
from dataprep.tokenize.manifest import load_manifest
from dataprep.tokenize.shards import open_dataset
from pretrain.components.document_bounds import document_ids
from pretrain.components.mixture_order import BLOCK, MixtureOrder, block_counts  # noqa: F401 (re-exported)
from pretrain.components.remote_shards import BlockCache, Retry, is_remote, open_remote_dataset
from pretrain.config.data import DataCacheConfig, DataConfig


class TokenStream:
    """Chosen documents of a list of shards, concatenated; reads any token range via the memory maps
    (or the remote shards' cache)."""

    def __init__(self, shards: list, keep: list[np.ndarray]):
        self.shards = shards
        seg_shard, seg_start, seg_len = [], [], []
        for i, (shard, mask) in enumerate(zip(shards, keep)):
            # runs of consecutive kept documents become one contiguous token segment
            edges = np.diff(np.concatenate(([0], mask.astype(np.int8), [0])))
            starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
            lo, hi = shard.doc_offsets[starts], shard.doc_offsets[ends]
            nonempty = hi > lo
            seg_shard.append(np.full(int(nonempty.sum()), i, dtype=np.int32))
            seg_start.append(lo[nonempty])
            seg_len.append((hi - lo)[nonempty])
        self.seg_shard = np.concatenate(seg_shard) if seg_shard else np.zeros(0, np.int32)
        self.seg_start = np.concatenate(seg_start) if seg_start else np.zeros(0, np.int64)
        self.cum = np.concatenate(([0], np.cumsum(np.concatenate(seg_len) if seg_len else [], dtype=np.int64)))
        self.num_tokens = int(self.cum[-1])

    def read(self, start: int, length: int) -> np.ndarray:
        """Tokens [start, start + length) of the stream, as int64."""
        out = np.empty(length, dtype=np.int64)
        filled = 0
        for shard, begin, take in self._pieces(start, length):
            out[filled : filled + take] = self.shards[shard].tokens[begin : begin + take]
            filled += take
        return out

    def find_out_of_vocab(self, start: int, length: int, vocab_size: int) -> tuple[str, int, int] | None:
        """The first id outside ``[0, vocab_size)`` in ``[start, start + length)``: (shard's .bin, its token
        offset there, the id); None when there is none."""
        for shard, begin, take in self._pieces(start, length):
            tokens = np.asarray(self.shards[shard].tokens[begin : begin + take], dtype=np.int64)
            bad = np.flatnonzero((tokens < 0) | (tokens >= vocab_size))
            if bad.size:
                return f"{self.shards[shard].prefix}.bin", begin + int(bad[0]), int(tokens[bad[0]])
        return None

    def prefetch(self, start: int, length: int) -> None:
        """Ask remote shards to fetch the tokens of a later ``read`` in the background."""
        for shard, begin, take in self._pieces(start, length):
            tokens = self.shards[shard].tokens
            if hasattr(tokens, "prefetch"):
                tokens.prefetch(begin, begin + take)

    def _pieces(self, start: int, length: int):
        """(shard, first token, token count) of each contiguous piece of ``[start, start + length)``."""
        seg = int(np.searchsorted(self.cum, start, side="right")) - 1
        filled = 0
        while filled < length:
            offset = start + filled - int(self.cum[seg])
            take = min(length - filled, int(self.cum[seg + 1] - self.cum[seg]) - offset)
            yield int(self.seg_shard[seg]), int(self.seg_start[seg]) + offset, take
            filled += take
            seg += 1


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


@dataclass
class Source:
    """One token-shard directory (a local folder or a URL) cut into samples of ``seq_len + 1`` tokens."""

    path: str
    train: TokenStream
    val: TokenStream
    seq_len: int
    vocab_size: int  # the tokenizer's (the manifest's): every id is below it
    cache: BlockCache | None = None  # where a URL's blocks are kept; None for a local folder
    name: str = ""  # in the per-source token counts; default: the path
    tokenizer: str = ""  # the manifest's tokenizer identity: sources of one run must share it

    @classmethod
    def open(
        cls,
        path: str,
        seq_len: int,
        val_fraction: float,
        seed: int,
        vocab_size: int | None = None,
        cache: BlockCache | None = None,
        val_samples: int = 1,
        name: str | None = None,
    ) -> "Source":
        """A URL is read through ``cache`` (default: a temporary one); a local folder through memory maps.
        With ``val_fraction`` > 0, at least ``val_samples`` validation samples are held out where the
        source allows (``hold_out``)."""
        if is_remote(path):
            cache = cache or open_cache(DataCacheConfig())
            manifest, shards = open_remote_dataset(path, cache)
        else:
            cache, (manifest, shards) = None, (load_manifest(path), open_dataset(path))
        if vocab_size is not None and manifest["vocab_size"] > vocab_size:
            raise UsageError(
                f"{path}: the tokenizer's vocabulary {manifest['vocab_size']} (manifest vocab_size) exceeds "
                f"the model's vocab_size {vocab_size}: set model.vocab_size to {manifest['vocab_size']} "
                "or auto, or use shards made with the model's tokenizer"
            )
        held_out = hold_out(path, shards, val_fraction, seed, val_samples * seq_len + 1)
        source = cls(
            path,
            TokenStream(shards, [~m for m in held_out]),
            TokenStream(shards, held_out),
            seq_len,
            manifest["vocab_size"],
            cache,
            name or path,
            _tokenizer_identity(manifest),
        )
        if source.num_samples("train") == 0:
            raise UsageError(
                f"{path}: {source.train.num_tokens} training tokens, fewer than seq_len + 1 = {seq_len + 1}"
            )
        return source

    def num_samples(self, split: str) -> int:
        stream = self.train if split == "train" else self.val
        return max(0, (stream.num_tokens - 1) // self.seq_len)

    def sample(self, split: str, index: int) -> np.ndarray:
        stream = self.train if split == "train" else self.val
        return stream.read(index * self.seq_len, self.seq_len + 1)

    def document_ids(self, split: str, index: int) -> np.ndarray:
        """Each token's document number in ``sample(split, index)`` (pretrain/components/document_bounds.py)."""
        stream = self.train if split == "train" else self.val
        return document_ids(stream, index * self.seq_len, self.seq_len + 1)

    def find_out_of_vocab(self, split: str, index: int) -> tuple[str, int, int] | None:
        stream = self.train if split == "train" else self.val
        return stream.find_out_of_vocab(index * self.seq_len, self.seq_len + 1, self.vocab_size)

    def prefetch(self, split: str, index: int) -> None:
        stream = self.train if split == "train" else self.val
        stream.prefetch(index * self.seq_len, self.seq_len + 1)

    @property
    def remote(self) -> bool:
        return is_remote(self.path)


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


def open_cache(cfg: DataCacheConfig, folder: str | None = None) -> BlockCache:
    (
        """The block cache for sources given as URLs, in ``folder`` (default: a temporary folder, removed with the """
        """cache)."""
    )
    temporary = None if folder else tempfile.TemporaryDirectory(prefix="ccpretrain-data-cache-")
    cache = BlockCache(
        folder or temporary.name, cfg.max_bytes, cfg.block_bytes, cfg.workers, Retry(cfg.retries, cfg.backoff_s)
    )
    cache.temporary = temporary  # lives as long as the cache
    return cache


def _tokenizer_identity(manifest: dict) -> str:
    described = manifest.get("tokenizer") or {}
    return str(described.get("model_sha256") or json.dumps(described, sort_keys=True))


def open_sources(
    cfg: DataConfig, seq_len: int, vocab_size: int | None = None, cache_dir: str | None = None, val_samples: int = 1
) -> list[Source]:
    """Every source; those given as URLs share one cache in ``cache_dir`` (one folder per process).
    Sources tokenized with different tokenizers are refused: one id would stand for different text."""
    missing = [s.path for s in cfg.sources if not is_remote(s.path) and not os.path.exists(s.path)]
    if missing:
        raise MissingPath(f"data source(s) not found: {', '.join(missing)}")
    cache = open_cache(cfg.cache, cache_dir) if any(is_remote(s.path) for s in cfg.sources) else None
    sources = [
        Source.open(s.path, seq_len, cfg.val_fraction, cfg.seed, vocab_size, cache, val_samples, s.name)
        for s in cfg.sources
    ]
    groups: dict[str, list[str]] = {}
    for source in sources:
        groups.setdefault(source.tokenizer, []).append(source.name)
    if len(groups) > 1:
        listed = "; ".join(", ".join(names) for names in groups.values())
        raise UsageError(
            f"data sources were tokenized with {len(groups)} different tokenizers ({listed}): the same id "
            "would mean different text in each. Tokenize every source with one tokenizer, e.g. "
            "`dataprep run wikipedia ... --set stages.-1.tokenizer=out/web/tokenizer`"
        )
    return sources


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
