"""Token shards read from an fsspec URL (s3://, gs://, https://, file://) instead of memory maps.

The manifest and each shard's ``.idx`` are fetched once and kept in memory; ``.bin`` tokens are read with
ranged requests in fixed-size blocks through ``BlockCache``, a local folder with a byte limit and
least-recently-used eviction. Worker threads fetch the blocks of samples the loader will need next
(``prefetch``). Every request is retried with exponential backoff on transient errors (connection
errors, 5xx); a missing file, a size that differs from the manifest or a short read fails loudly with
the URL, so an epoch is never silently shorter.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import fsspec
import numpy as np

from dataprep.core.errors import MissingPath, UsageError
from dataprep.tokenize.manifest import MANIFEST_NAME, parse_manifest
from dataprep.tokenize.shards import ShardError, ShardIndex, check_shard, parse_index

BLOCK_SUFFIX = ".block"
# aiohttp's (fsspec's HTTP filesystem) base classes of dropped connections and cut-off bodies, by name:
# aiohttp is an optional dependency
NETWORK_ERRORS = ("ClientConnectionError", "ClientPayloadError")


def is_remote(path: str) -> bool:
    """Whether a data source is a URL read through fsspec (``file://`` included) rather than a local folder."""
    return "://" in path


class RemoteReadError(OSError):
    """A request that kept failing after every retry; the message names the URL."""


class UnreadableSource(RemoteReadError, UsageError):
    """A source's manifest unreadable before any work (most often a wrong host, port or scheme): a usage
    error, one line and exit status 2 from the commands."""


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: connection problems, timeouts, HTTP 5xx and 429 (also when wrapped by fsspec)."""
    while exc is not None:
        status = getattr(exc, "status", None) or getattr(exc, "code", None)
        if isinstance(status, int) and status >= 400:
            return status >= 500 or status == 429
        if isinstance(exc, (ConnectionError, TimeoutError)) or any(
            c.__name__ in NETWORK_ERRORS for c in type(exc).__mro__
        ):
            return True
        exc = exc.__cause__
    return False


@dataclass(frozen=True)
class Retry:
    """How often and how patiently a failing request is repeated."""

    retries: int = 5
    backoff_s: float = 0.5

    def call(self, url: str, request):
        for attempt in range(self.retries + 1):
            try:
                return request()
            except Exception as exc:
                if not is_transient(exc):
                    raise
                if attempt == self.retries:
                    raise RemoteReadError(f"{url}: {self.retries + 1} attempts failed, the last with {exc!r}") from exc
                time.sleep(self.backoff_s * 2**attempt)


class BlockCache:
    """Fixed-size blocks of remote files in a local folder that never holds more than ``max_bytes``.

    Blocks are evicted least recently used first. ``read`` waits for a block a worker is already
    fetching instead of fetching it twice; ``prefetch`` queues a block for the workers."""

    def __init__(self, folder: str, max_bytes: int, block_bytes: int, workers: int = 32, retry: Retry = Retry()):
        if block_bytes > max_bytes:
            raise UsageError(f"cache block_bytes {block_bytes} exceeds its max_bytes {max_bytes}")
        self.folder, self.max_bytes, self.block_bytes, self.retry = folder, max_bytes, block_bytes, retry
        os.makedirs(folder, exist_ok=True)
        for name in os.listdir(folder):  # blocks of an earlier run may be stale: start empty
            if name.endswith((BLOCK_SUFFIX, BLOCK_SUFFIX + ".tmp")):
                os.unlink(os.path.join(folder, name))
        self._sizes: OrderedDict[str, int] = OrderedDict()  # block file -> bytes, least recent first
        self.bytes_on_disk = 0
        self._pending: dict[str, Future] = {}
        self._lock = threading.Lock()
        self._workers = ThreadPoolExecutor(workers, thread_name_prefix="shard-read-ahead")
        self.bytes_fetched = 0
        self.temporary = None  # a TemporaryDirectory holding ``folder``, when the cache owns it

    def read(self, key: str, fetch, lo: int, hi: int) -> bytes:
        """Bytes ``[lo, hi)`` of block ``key``; ``fetch()`` returns the whole block when it is not cached."""
        with self._lock:
            if key in self._sizes:
                self._sizes.move_to_end(key)
                with open(self._path(key), "rb") as fh:
                    fh.seek(lo)
                    return fh.read(hi - lo)
            future, mine = self._claim(key)
        if mine:
            self._download(key, fetch, future)
        return future.result()[lo:hi]

    def prefetch(self, key: str, fetch) -> None:
        with self._lock:
            if key in self._sizes or key in self._pending:
                return
            future, _ = self._claim(key)
        self._workers.submit(self._download, key, fetch, future)

    def close(self) -> None:
        """Stop the workers (queued fetches are dropped) and remove the folder when the cache owns it."""
        self._workers.shutdown(wait=True, cancel_futures=True)
        if self.temporary is not None:
            self.temporary.cleanup()

    def _claim(self, key: str) -> tuple[Future, bool]:
        """The future of a block being fetched, and whether the caller must fetch it (lock held)."""
        if key in self._pending:
            return self._pending[key], False
        self._pending[key] = Future()
        return self._pending[key], True

    def _download(self, key: str, fetch, future: Future) -> None:
        try:
            data = fetch()
            self._store(key, data)
            future.set_result(data)
        except BaseException as exc:
            future.set_exception(exc)
        finally:
            with self._lock:
                self._pending.pop(key, None)

    def _store(self, key: str, data: bytes) -> None:
        with self._lock:
            self.bytes_fetched += len(data)
            while self._sizes and self.bytes_on_disk + len(data) > self.max_bytes:
                old, size = self._sizes.popitem(last=False)
                os.unlink(self._path(old))
                self.bytes_on_disk -= size
            tmp = self._path(key) + ".tmp"
            with open(tmp, "wb") as fh:
                fh.write(data)
            os.replace(tmp, self._path(key))
            self._sizes[key] = len(data)
            self.bytes_on_disk += len(data)

    def _path(self, key: str) -> str:
        return os.path.join(self.folder, key + BLOCK_SUFFIX)


class RemoteFile:
    """A remote file of known size, read as ranges of cached blocks."""

    def __init__(self, url: str, size: int, cache: BlockCache):
        self.url, self.size, self.cache = url, size, cache
        self.fs, self.fs_path = fsspec.core.url_to_fs(url)
        self._key = hashlib.sha1(url.encode()).hexdigest()[:16]

    def read(self, offset: int, length: int) -> bytes:
        parts = [self.cache.read(*self._block(b), lo, hi) for b, lo, hi in self._spans(offset, length)]
        return b"".join(parts)

    def prefetch(self, offset: int, length: int) -> None:
        for b, _, _ in self._spans(offset, length):
            self.cache.prefetch(*self._block(b))

    def _spans(self, offset: int, length: int):
        """(block, start, end within the block) covering ``[offset, offset + length)``."""
        size = self.cache.block_bytes
        for b in range(offset // size, (offset + length - 1) // size + 1 if length else offset // size):
            yield b, max(offset - b * size, 0), min(offset + length - b * size, size)

    def _block(self, b: int):
        return f"{self._key}-{b}", lambda: self._fetch(b)

    def _fetch(self, b: int) -> bytes:
        start = b * self.cache.block_bytes
        end = min(start + self.cache.block_bytes, self.size)
        try:
            data = self.cache.retry.call(self.url, lambda: self.fs.cat_file(self.fs_path, start=start, end=end))
        except FileNotFoundError:
            raise ShardError(f"{self.url} is missing: removed from the server during the run") from None
        except RemoteReadError:
            raise
        except Exception as exc:  # not transient (e.g. HTTP 416): name the file and the range
            raise ShardError(
                f"{self.url}: bytes [{start}, {end}) could not be read ({exc}): changed on the server?"
            ) from exc
        if len(data) != end - start:
            raise ShardError(
                f"{self.url}: bytes [{start}, {end}) read as {len(data)} bytes: the file changed on the server"
            )
        return data


class RemoteTokens:
    """A shard's ``.bin`` as a token array that slicing reads through the cache (like its memory map)."""

    def __init__(self, file: RemoteFile, dtype: np.dtype):
        self.file, self.dtype = file, dtype.newbyteorder("<")

    def __len__(self) -> int:
        return self.file.size // self.dtype.itemsize

    def __getitem__(self, key: slice) -> np.ndarray:
        start, stop, _ = key.indices(len(self))
        size = self.dtype.itemsize
        return np.frombuffer(self.file.read(start * size, max(stop - start, 0) * size), dtype=self.dtype)

    def prefetch(self, start: int, stop: int) -> None:
        self.file.prefetch(start * self.dtype.itemsize, (stop - start) * self.dtype.itemsize)


class RemoteShard(ShardIndex):
    """One ``.bin``/``.idx`` pair at a URL: the ``.idx`` in memory, the tokens read on demand."""

    def __init__(self, prefix: str, entry: dict, cache: BlockCache):
        self.prefix, self.name = prefix, entry["name"]
        fs, _ = fsspec.core.url_to_fs(prefix + ".idx")
        index = _fetch_checked(fs, prefix + ".idx", entry.get("idx_bytes"), entry.get("idx_sha256"), cache.retry)
        self.dtype, self.doc_lengths, self.doc_offsets, self.document_indices = parse_index(self.name, index)
        bin_url, want = prefix + ".bin", self.num_tokens * self.dtype.itemsize
        _check_size(fs, bin_url, entry.get("bin_bytes", want), cache.retry)
        if entry.get("bin_bytes", want) != want:
            raise ShardError(f"{bin_url}: manifest says {entry['bin_bytes']} bytes but the .idx describes {want}")
        self.tokens = RemoteTokens(RemoteFile(bin_url, want, cache), self.dtype)


def _check_size(fs, url: str, want: int | None, retry: Retry) -> None:
    """A missing file, or one whose size is not the manifest's, is refused naming its URL."""
    try:
        size = retry.call(url, lambda: fs.info(fsspec.core.url_to_fs(url)[1])["size"])
    except FileNotFoundError:
        raise ShardError(f"{url} is missing (listed in the {MANIFEST_NAME} beside it)") from None
    if want is not None and size != want:
        raise ShardError(
            f"{url} is {size} bytes but {MANIFEST_NAME} says {want}: changed since the manifest was written"
        )


def _fetch_checked(fs, url: str, size: int | None, sha256: str | None, retry: Retry) -> bytes:
    """A whole small file, refused naming its URL when missing or when its size or SHA-256 is not the manifest's."""
    path = fsspec.core.url_to_fs(url)[1]
    try:
        data = retry.call(url, lambda: fs.cat_file(path))
    except FileNotFoundError:
        raise ShardError(f"{url} is missing (listed in the {MANIFEST_NAME} beside it)") from None
    if size is not None and len(data) != size:
        raise ShardError(
            f"{url} is {len(data)} bytes but {MANIFEST_NAME} says {size}: changed since the manifest was written"
        )
    if sha256 and hashlib.sha256(data).hexdigest() != sha256:
        raise ShardError(f"{url}: SHA-256 does not match {MANIFEST_NAME} (file changed or corrupt)")
    return data


def load_remote_manifest(url: str, retry: Retry = Retry()) -> dict:
    """``url/manifest.json``, fetched with retries and checked like a local one."""
    path = url.rstrip("/") + "/" + MANIFEST_NAME
    fs, fs_path = fsspec.core.url_to_fs(path)
    try:
        text = retry.call(path, lambda: fs.cat_file(fs_path)).decode("utf-8")
    except FileNotFoundError:
        raise MissingPath(
            f"{path} not found: not a token-shard directory, or its tokenize step did not finish"
        ) from None
    except RemoteReadError as exc:
        raise UnreadableSource(
            f"{exc}; check the URL (data.sources, --data) and that its server is reachable"
        ) from None
    return parse_manifest(path, text)


def open_remote_dataset(url: str, cache: BlockCache) -> tuple[dict, list[RemoteShard]]:
    """The manifest and every shard it lists, each checked against it (sizes, .idx checksum, counts)."""
    manifest = load_remote_manifest(url, cache.retry)
    dtype = np.dtype(manifest["dtype"])
    base = url.rstrip("/")
    shards = [check_shard(RemoteShard(f"{base}/{e['name']}", e, cache), e, dtype) for e in manifest["shards"]]
    return manifest, shards
