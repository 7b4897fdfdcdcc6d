"""Token sources: a token-shard directory (a local folder or a URL) cut into fixed-length samples.

Each source is split by documents into a training and a validation part (pretrain/components/validation_split.py).
Each part is the concatenation of its documents (``TokenStream``); sample ``i`` is tokens
``[i*seq_len, i*seq_len + seq_len + 1)`` of it, read from the memory maps (never the corpus in RAM), or for a
source given as a URL through a local block cache (``remote_shards``). Samples therefore cross document
boundaries, as in GPT/Megatron pretraining; a sample's document numbers come from the shards' index
(pretrain/components/document_bounds.py). The sources of one run must share one tokenizer.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass

import numpy as np

from dataprep.core.errors import MissingPath, UsageError
from dataprep.tokenize.manifest import load_manifest
from dataprep.tokenize.shards import open_dataset
from pretrain.components.document_bounds import document_ids
from pretrain.components.remote_shards import BlockCache, Retry, is_remote, open_remote_dataset
from pretrain.components.validation_split import hold_out
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
