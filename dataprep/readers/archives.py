"""What the code and arXiv readers share about tar archives: a streaming read that skips a member it does
not want at the speed of decompression (tarfile's own ``r|gz`` stream re-copies its buffer on every
block, so skipping a member of zeros costs minutes), and member names relative to the archive."""

from __future__ import annotations

import bz2
import gzip
import lzma
import tarfile
import zlib
from typing import IO

# How a damaged archive shows itself while it is read: cut short, bad compressed bytes, a bad header.
ARCHIVE_ERRORS = (EOFError, tarfile.ReadError, OSError, zlib.error, lzma.LZMAError)
_BLOCK = 1 << 20


def open_tar(raw: IO[bytes]) -> tarfile.TarFile:
    """A tar archive (plain, gzip, bz2 or xz, told by its first bytes) read as a stream of members."""
    head = raw.read(6)
    raw.seek(0)
    if head.startswith(b"\x1f\x8b"):
        raw = gzip.GzipFile(fileobj=raw)
    elif head.startswith(b"BZh"):
        raw = bz2.BZ2File(raw)
    elif head.startswith(b"\xfd7zXZ\x00"):
        raw = lzma.LZMAFile(raw)
    return tarfile.open(fileobj=raw, mode="r|", bufsize=_BLOCK)


def member_name(name: str) -> str:
    """A member's path relative to the archive: ``./`` and leading ``/`` removed (an absolute member is
    read as if it were relative, never written anywhere)."""
    return name.lstrip("/").removeprefix("./").lstrip("/")
