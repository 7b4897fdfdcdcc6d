"""WARC records written byte by byte: the demo crawl, the benchmarks' inputs and the tests' fixtures all come
from this one writer, so a record the reader meets in a test is a record as a crawler writes it (or, with
``length_error``, one damaged on purpose)."""

from __future__ import annotations

import base64
import hashlib
import uuid
from datetime import datetime


def warc_record(
    record_type: str,
    headers: dict[str, str | None],
    block: bytes,
    *,
    version: str = "1.1",
    block_digest: bool = False,
    payload: bytes | None = None,
    length_error: int = 0,
) -> bytes:
    """One uncompressed record: the version line, ``WARC-Type``, ``headers`` in their order, then the block.

    ``Content-Length`` stands where ``headers`` holds it (value None) or else last, off by ``length_error``
    bytes when a test wants it wrong. ``payload`` adds its ``WARC-Payload-Digest``, ``block_digest`` the
    block's, both after the other headers (as fastwarc writes them)."""
    length = str(len(block) + length_error)
    fields = [("WARC-Type", record_type)]
    fields += [(key, length if key == "Content-Length" else value) for key, value in headers.items()]
    if "Content-Length" not in headers:
        fields.append(("Content-Length", length))
    if payload is not None:
        fields.append(("WARC-Payload-Digest", sha1_digest(payload)))
    if block_digest:
        fields.append(("WARC-Block-Digest", sha1_digest(block)))
    head = f"WARC/{version}\r\n" + "".join(f"{key}: {value}\r\n" for key, value in fields) + "\r\n"
    return head.encode("utf-8") + block + b"\r\n\r\n"


def record_id(name: str) -> str:
    """A stable ``<urn:uuid:...>`` for ``name`` (the same name always gets the same id)."""
    return f"<urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, name)}>"


def warc_date(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def sha1_digest(data: bytes) -> str:
    """A WARC digest: ``sha1:`` and the base32 of the SHA-1."""
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()
