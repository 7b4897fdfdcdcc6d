"""Token shards in Megatron-LM's indexed-dataset layout: a ``.bin`` of raw little-endian tokens and an
``.idx`` describing where each document starts.

The ``.idx`` layout (megatron/core/datasets/indexed_dataset.py), all little-endian:

    9 bytes   magic  b"MMIDIDX\\x00\\x00"
    uint64    version (1)
    uint8     dtype code (uint16 = 8, int32 = 4, ...)
    uint64    sequence count N
    uint64    document count D (= documents + 1: document_indices start with 0)
    int32[N]  sequence lengths, in tokens
    int64[N]  sequence byte offsets into the .bin
    int64[D]  document indices (sequence index where each document starts, then N)

We write one sequence per document, so document i is sequence i. The files can be read by Megatron-LM,
NeMo and our own loader without conversion; the reader here checks every size and offset so a damaged
shard fails loudly, naming the shard, instead of feeding garbage to training.
"""

from __future__ import annotations

import hashlib
import os
import struct
import tempfile
from typing import Iterable, Iterator

import numpy as np

from dataprep.core.errors import UsageError
from dataprep.core.storage import atomic_output, publish, temp_dir_for, write_synced
from dataprep.tokenize.manifest import MANIFEST_NAME, UINT16_VOCAB_LIMIT, dtype_for_vocab, load_manifest

__all__ = [
    "MAGIC",
    "DTYPE_CODES",
    "UINT16_VOCAB_LIMIT",
    "ShardError",
    "IndexedShard",
    "ShardWriter",
    "check_shard",
    "dtype_for_vocab",
    "load_manifest",
    "open_dataset",
    "parse_index",
    "write_shard",
]

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
HEADER = struct.Struct("<9sQBQQ")  # magic, version, dtype code, sequence count, document count
# Megatron's DType enum: the code stored in the header.
DTYPE_CODES = {
    np.dtype(np.uint8): 1,
    np.dtype(np.int8): 2,
    np.dtype(np.int16): 3,
    np.dtype(np.int32): 4,
    np.dtype(np.int64): 5,
    np.dtype(np.float64): 6,
    np.dtype(np.float32): 7,
    np.dtype(np.uint16): 8,
}
CODE_DTYPES = {code: dtype for dtype, code in DTYPE_CODES.items()}


class ShardError(UsageError):
    """A shard that is missing, damaged or disagrees with its manifest; the message names it."""


# ---------------------------------------------------------------------------------------------
# Writing


def _as_tokens(doc, dtype: np.dtype) -> np.ndarray:
    arr = np.asarray(doc)
    if arr.ndim != 1:
        raise ValueError(f"a document must be a 1-D token array, got shape {arr.shape}")
    if arr.size and arr.dtype != dtype:
        if not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"token ids must be integers, got {arr.dtype}")
        info = np.iinfo(dtype)
        lo, hi = int(arr.min()), int(arr.max())
        if lo < info.min or hi > info.max:
            raise ValueError(f"token id {hi if hi > info.max else lo} does not fit in {dtype}")
    return arr.astype(dtype, copy=False)


def _index_bytes(lengths: np.ndarray, dtype: np.dtype) -> bytes:
    n = len(lengths)
    pointers = np.zeros(n, dtype=np.int64)
    if n > 1:
        np.cumsum(lengths[:-1] * dtype.itemsize, dtype=np.int64, out=pointers[1:])
    doc_indices = np.arange(n + 1, dtype=np.int64)
    header = HEADER.pack(MAGIC, VERSION, DTYPE_CODES[dtype], n, n + 1)
    return b"".join(
        [header, lengths.astype("<i4").tobytes(), pointers.astype("<i8").tobytes(), doc_indices.astype("<i8").tobytes()]
    )


class _ShardFile:
    """One shard being written: tokens stream into a temporary ``.bin``; ``finish`` writes the ``.idx``
    and renames both into place (the ``.idx`` last: a shard without it is unfinished)."""

    def __init__(self, prefix: str, dtype) -> None:
        self.dtype = np.dtype(dtype).newbyteorder("=")
        if self.dtype not in DTYPE_CODES:
            raise ValueError(f"unsupported token dtype {dtype}")
        self.prefix, self.name = prefix, os.path.basename(prefix.rstrip("/"))
        fd, self._bin_tmp = tempfile.mkstemp(prefix=f".tmp-{self.name}-", suffix=".bin", dir=temp_dir_for(prefix))
        self._fh = os.fdopen(fd, "wb")
        self._hash = hashlib.sha256()
        self.lengths: list[int] = []
        self.tokens = 0

    def add(self, doc) -> None:
        arr = _as_tokens(doc, self.dtype)
        if arr.size >= 2**31:
            raise ValueError(f"document of {arr.size} tokens exceeds the int32 length field")
        data = arr.astype(self.dtype.newbyteorder("<"), copy=False).tobytes()
        self._fh.write(data)
        self._hash.update(data)
        self.lengths.append(arr.size)
        self.tokens += arr.size

    def finish(self) -> dict:
        try:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()
            index = _index_bytes(np.asarray(self.lengths, dtype=np.int64), self.dtype)
            with atomic_output(self.prefix + ".idx", prefix=f".tmp-{self.name}-", suffix=".idx") as idx_tmp:
                write_synced(idx_tmp, index)
                publish(self._bin_tmp, self.prefix + ".bin")  # the .idx follows when the block ends
        finally:
            self.abort()
        return {
            "name": self.name,
            "documents": len(self.lengths),
            "tokens": self.tokens,
            "bin_bytes": self.tokens * self.dtype.itemsize,
            "idx_bytes": len(index),
            "bin_sha256": self._hash.hexdigest(),
            "idx_sha256": hashlib.sha256(index).hexdigest(),
        }

    def abort(self) -> None:
        """Drop the temporary files (after an error, or once published)."""
        self._fh.close()
        if os.path.exists(self._bin_tmp):
            os.unlink(self._bin_tmp)


def write_shard(prefix: str, docs: Iterable[np.ndarray], dtype) -> dict:
    """Write ``prefix.bin`` and ``prefix.idx`` from token arrays, one per document, streaming.

    Both files are written under temporary names and renamed into place only when complete, so a
    crash leaves no shard under the final name and a rerun simply overwrites. Returns the metadata
    the manifest records: name, documents, tokens, bytes and SHA-256 of both files.
    """
    shard = _ShardFile(prefix, dtype)
    try:
        for doc in docs:
            shard.add(doc)
    except BaseException:
        shard.abort()
        raise
    return shard.finish()


class ShardWriter:
    """Rolls documents into shards of about ``tokens_per_shard`` tokens named ``{base}-{seq:05d}``.

    A shard closes at the first document boundary at or past the target, so documents never span
    shards. Names depend only on ``base`` and document order, so a rerun of the same input writes the
    same files. Use as a context manager: on error the unfinished shard is discarded.
    """

    def __init__(self, base: str, dtype, tokens_per_shard: int) -> None:
        self.base, self.dtype, self.tokens_per_shard = base, np.dtype(dtype), tokens_per_shard
        self.shards: list[dict] = []
        self._current: _ShardFile | None = None
        self._unique = [0, 0]  # documents, tokens written for the first time in the current shard
        self._later: list[tuple[np.ndarray, int]] = []  # documents still owed copies, and how many

    def add(self, doc: np.ndarray, copies: int = 1) -> None:
        """Write ``doc`` now; with ``copies`` > 1 its other copies come at ``close``, one round of
        every repeated document at a time, so copies of a document sit far apart (0 writes nothing)."""
        if copies < 1:
            return
        self._write(doc, first=True)
        if copies > 1:
            self._later.append((doc, copies - 1))

    def close(self) -> list[dict]:
        """Write the owed copies, finish the last shard; returns the metadata of every shard written.
        Each shard's ``unique_documents``/``unique_tokens`` count only first copies."""
        while self._later:
            for doc, _ in self._later:
                self._write(doc, first=False)
            self._later = [(doc, n - 1) for doc, n in self._later if n > 1]
        if self._current is not None:
            self._roll()
        return self.shards

    def _write(self, doc: np.ndarray, first: bool) -> None:
        if self._current is None:
            self._current = _ShardFile(f"{self.base}-{len(self.shards):05d}", self.dtype)
        self._current.add(doc)
        if first:
            self._unique[0] += 1
            self._unique[1] += len(doc)
        if self._current.tokens >= self.tokens_per_shard:
            self._roll()

    def _roll(self) -> None:
        current, self._current = self._current, None
        (documents, tokens), self._unique = self._unique, [0, 0]
        self.shards.append({**current.finish(), "unique_documents": documents, "unique_tokens": tokens})

    def __enter__(self) -> "ShardWriter":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is not None and self._current is not None:
            self._current.abort()


# ---------------------------------------------------------------------------------------------
# Reading


def parse_index(name: str, index) -> tuple[np.dtype, np.ndarray, np.ndarray, np.ndarray]:
    """Check an ``.idx`` (bytes or a memory map) and return its dtype, document lengths, document token
    offsets (documents + 1) and document indices; errors name the shard ``name``."""
    idx_size = len(index)
    if idx_size < HEADER.size:
        raise ShardError(f"shard {name}: .idx is {idx_size} bytes, shorter than the {HEADER.size}-byte header")
    magic, version, code, n_seq, n_doc = HEADER.unpack(bytes(index[: HEADER.size]))
    if magic != MAGIC:
        raise ShardError(
            f"shard {name}: bad magic {magic!r} in .idx (expected {MAGIC!r}): not a Megatron indexed dataset"
        )
    if version != VERSION:
        raise ShardError(f"shard {name}: .idx version {version}, only version {VERSION} is supported")
    if code not in CODE_DTYPES:
        raise ShardError(f"shard {name}: unknown dtype code {code} in .idx")
    dtype = CODE_DTYPES[code]
    expected = HEADER.size + 12 * n_seq + 8 * n_doc
    if idx_size != expected:
        raise ShardError(
            f"shard {name}: .idx is {idx_size} bytes but its header ({n_seq} sequences, {n_doc} document "
            f"indices) needs {expected}: truncated or corrupt"
        )
    doc_lengths = np.frombuffer(index, dtype="<i4", count=n_seq, offset=HEADER.size)
    pointers = np.frombuffer(index, dtype="<i8", count=n_seq, offset=HEADER.size + 4 * n_seq)
    document_indices = np.frombuffer(index, dtype="<i8", count=n_doc, offset=HEADER.size + 12 * n_seq)
    if n_seq and int(doc_lengths.min()) < 0:
        raise ShardError(f"shard {name}: negative sequence length in .idx")
    doc_offsets = np.zeros(n_seq + 1, dtype=np.int64)
    np.cumsum(doc_lengths, dtype=np.int64, out=doc_offsets[1:])
    if not np.array_equal(pointers, doc_offsets[:-1] * dtype.itemsize):
        raise ShardError(f"shard {name}: sequence pointers in .idx do not match the sequence lengths")
    if n_doc < 1 or document_indices[0] != 0 or document_indices[-1] != n_seq or np.any(np.diff(document_indices) < 0):
        raise ShardError(f"shard {name}: document indices in .idx are inconsistent with {n_seq} sequences")
    return dtype, doc_lengths, doc_offsets, document_indices


class ShardIndex:
    """What a parsed ``.idx`` says of a shard, wherever its tokens are read from (``doc_offsets``)."""

    doc_offsets: np.ndarray
    doc_lengths: np.ndarray

    @property
    def num_docs(self) -> int:
        return len(self.doc_lengths)

    @property
    def num_tokens(self) -> int:
        return int(self.doc_offsets[-1])


class IndexedShard(ShardIndex):
    """Memory-mapped reader of one ``.bin``/``.idx`` pair; validates header and sizes on open."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.name = os.path.basename(prefix)
        idx_path, bin_path = prefix + ".idx", prefix + ".bin"
        for path in (idx_path, bin_path):
            if not os.path.exists(path):
                raise ShardError(f"shard {self.name}: .{path.rsplit('.', 1)[1]} is missing ({path})")
        self.dtype, self.doc_lengths, self.doc_offsets, self.document_indices = parse_index(
            self.name, np.memmap(idx_path, dtype=np.uint8, mode="r") if os.path.getsize(idx_path) else b""
        )
        bin_size = os.path.getsize(bin_path)
        want = int(self.doc_offsets[-1]) * self.dtype.itemsize
        if bin_size != want:
            raise ShardError(
                f"shard {self.name}: .bin is {bin_size} bytes but .idx describes {want}: truncated or mismatched"
            )
        little = self.dtype.newbyteorder("<")
        self.tokens = np.memmap(bin_path, dtype=little, mode="r") if bin_size else np.zeros(0, dtype=little)

    def __len__(self) -> int:
        return self.num_docs

    def doc(self, i: int) -> np.ndarray:
        """Tokens of document ``i`` (a read-only view into the memory map)."""
        if not -self.num_docs <= i < self.num_docs:
            raise IndexError(f"shard {self.name}: document {i} out of range (0..{self.num_docs - 1})")
        i %= self.num_docs
        return self.tokens[self.doc_offsets[i] : self.doc_offsets[i + 1]]

    def __iter__(self) -> Iterator[np.ndarray]:
        for i in range(self.num_docs):
            yield self.doc(i)

    def __repr__(self) -> str:
        return f"IndexedShard({self.prefix!r}, docs={self.num_docs}, tokens={self.num_tokens}, dtype={self.dtype})"


def open_dataset(directory: str) -> list[IndexedShard]:
    """Open every shard listed in ``directory/manifest.json`` and check it against the manifest
    (documents, tokens, dtype, file sizes). Checksums are left to ``verify_dataset`` (they read every byte)."""
    manifest = load_manifest(directory)
    dtype = np.dtype(manifest["dtype"])
    shards = []
    for entry in manifest["shards"]:
        shards.append(check_shard(IndexedShard(os.path.join(directory, entry["name"])), entry, dtype))
    return shards


def check_shard(shard, entry: dict, dtype: np.dtype):
    """``shard`` (local or remote) if it agrees with its manifest entry on dtype, documents and tokens."""
    problems = []
    if shard.dtype != dtype:
        problems.append(f"dtype {shard.dtype} (manifest: {dtype})")
    if shard.num_docs != entry["documents"]:
        problems.append(f"{shard.num_docs} documents (manifest: {entry['documents']})")
    if shard.num_tokens != entry["tokens"]:
        problems.append(f"{shard.num_tokens} tokens (manifest: {entry['tokens']})")
    if problems:
        raise ShardError(f"shard {entry['name']} disagrees with {MANIFEST_NAME}: " + ", ".join(problems))
    return shard
