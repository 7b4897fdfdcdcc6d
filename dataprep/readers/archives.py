"""What the code and arXiv readers share about tar archives: a streaming read that skips a member it does
not want at the speed of decompression (tarfile's own ``r|gz`` stream re-copies its buffer on every
block, so skipping a large member costs time quadratic in its size), and member names relative to the archive."""

from __future__ import annotations

import bz2
import gzip
import lzma
import tarfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import IO

# How a damaged archive shows itself while it is read: cut short, bad compressed bytes, a bad header.
ARCHIVE_ERRORS = (EOFError, tarfile.ReadError, OSError, zlib.error, lzma.LZMAError)
_BLOCK = 1 << 20


@contextmanager
def open_tar(raw: IO[bytes]) -> Iterator[tarfile.TarFile]:
    """A tar archive (plain, gzip, bz2 or xz, told by its first bytes) read as a stream of members."""
    with _decompressed(raw) as stream, tarfile.open(fileobj=stream, mode="r|", bufsize=_BLOCK) as archive:
        yield archive


def _decompressed(raw: IO[bytes]):
    head = raw.read(6)
    raw.seek(0)
    if head.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=raw)
    if head.startswith(b"BZh"):
        return bz2.BZ2File(raw)
    if head.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(raw)
    return nullcontext(raw)


def member_name(name: str) -> str:
    """A member's path relative to the archive: ``./`` and leading ``/`` removed (an absolute member is
    read as if it were relative, never written anywhere)."""
    return name.lstrip("/").removeprefix("./").lstrip("/")
