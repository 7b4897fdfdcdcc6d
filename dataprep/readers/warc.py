"""WARC and WET records -> documents: HTTP payloads decoded, bad Content-Length resynchronised at the
next record boundary (see the package docstring)."""

from __future__ import annotations

import logging
import re
import zlib
from typing import Iterator

import brotli  # a FastWARC dependency
from fastwarc.warc import ArchiveIterator, WarcRecordType

from dataprep.core.config import InputConfig
from dataprep.core.stage import StageResult
from dataprep.core.stats import RECORDS_SKIPPED
from dataprep.core.storage import open_stream
from dataprep.readers.batches import BadInputFile, Batches, broken_file_reason, hash_id

log = logging.getLogger(__name__)

HTML_TYPES = {"text/html", "application/xhtml+xml"}
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([a-zA-Z0-9_.:-]+)""", re.IGNORECASE)


# ---------------------------------------------------------------------------------------------
# WARC / WET


_DOCUMENT_TYPES = WarcRecordType.response | WarcRecordType.conversion


def read_warc(path: str, cfg: InputConfig, out: Batches) -> Iterator[StageResult]:
    with open_stream(path, decompress=False) as fh:  # FastWARC detects gzip itself, per member or not
        gzipped = fh.read(2) == b"\x1f\x8b"
        resync = fh.seekable()
        pos: int | None = 0
        counted = False
        while pos is not None:
            pos, counted = yield from _read_warc_from(fh, pos, gzipped, resync, counted, path, cfg, out)


_STREAM_ERRORS = (OSError, EOFError, zlib.error)  # the file's bytes broke, not one record's content


def _read_warc_from(
    fh, pos: int, gzipped: bool, resync: bool, counted: bool, path: str, cfg: InputConfig, out: Batches
):
    """Read records from byte ``pos``; return where to resume after a break (None: done) and whether
    that break was counted (``counted``: the previous call's was, so the same break met again at
    ``pos`` is not counted twice).

    A record is committed only once the next one parses (or the file ends cleanly): a too-short
    Content-Length shows only as the next header failing to parse."""
    fh.seek(pos)
    pending = None  # (stream position, decision) of the last record read
    read_any = False
    try:
        for record in ArchiveIterator(fh, record_types=WarcRecordType.any_type, parse_http=True):
            read_any = True
            if pending:
                _commit(out, pending[1])
                pending = None
            if out.full():
                yield out.flush()
            try:
                decision = _warc_record(record, path, cfg)
            except _STREAM_ERRORS:
                raise  # the stream broke inside this record
            except Exception as exc:  # noqa: BLE001 - one odd record must not end the file
                out.drop(f"error:{type(exc).__name__}", exc, id=hash_id(path, record.stream_pos))
                continue
            out.bytes_read += record.content_length
            if decision[0] == "broken":
                resume = _next_record(fh, record.stream_pos + 1, gzipped) if resync else None
                if (
                    resume is None and decision[1] == "error:malformed_record"
                ):  # no record follows: the file was cut in it
                    decision = ("truncated", "error:truncated", decision[2])
                _commit(out, decision)
                return resume, False
            if decision[0] == "truncated":
                _commit(out, decision)
                return None, False
            pending = (record.stream_pos, decision)
    except (ValueError, *_STREAM_ERRORS) as exc:  # the stream itself broke
        reason = broken_file_reason(exc)
        if reason == "error:malformed_record" and pos == 0 and not read_any:
            reason = "error:not_warc"
        start = pending[0] if pending else pos
        # a gzip stream holding every record has no boundaries to resume at: only one member per record does
        boundaries = resync and (not gzipped or _opens_record(fh, start, gzipped))
        if pending and reason == "error:malformed_record" and boundaries and not _intact(fh, pending[0], gzipped):
            _commit(out, ("broken", "error:bad_content_length", pending[1][2]))
        else:
            if pending:
                _commit(out, pending[1])
            if not (counted and not read_any):
                out.file_error(reason, _WHAT[reason], exc, at=start)
        if reason in ("error:truncated", "error:not_warc", "error:unreadable") or not boundaries:
            return None, True
        return _next_record(fh, start + 1, gzipped), True
    if pending:
        _commit(out, pending[1])
    return None, False


_WHAT = {
    "error:truncated": "the file ends inside a record (cut short); the records before it are kept",
    "error:corrupt_gzip": "corrupt gzip data; the records that decompress are kept",
    "error:unreadable": "reading failed",
    "error:not_warc": "not a WARC file (no WARC record at its start)",
    "error:malformed_record": "a record that does not parse; reading resumes at the next one",
    "error:bad_content_length": (
        "a record's Content-Length does not match its content; reading resumes at the next record"
    ),
}


def _commit(out: Batches, decision: tuple) -> None:
    action, reason, row = decision
    if action == "keep":
        out.keep(**row)
    elif action == "skip":  # a record that is no document (request, warcinfo, metadata, ...): counted, not a row
        out.counters[f"{RECORDS_SKIPPED}{reason}"] += 1
    elif action in ("broken", "truncated"):  # the file is damaged here: say which file
        out.drop(reason, BadInputFile(f"{out.source}: {_WHAT[reason]} (record {row['id']})"), **row)
    else:
        out.drop(reason, **row)


_WARC_LINE = re.compile(rb"(?:^|\n)(WARC/1\.[01]\r?\n)")
# The start of a WARC header block inside a payload: a record whose Content-Length ran past its end.
_EMBEDDED_HEADER = re.compile(rb"\nWARC/1\.[01]\r?\n(?:[A-Za-z-]+:[^\n]*\n){0,8}?WARC-(?:Type|Record-ID|Date):")


def _next_record(fh, start: int, gzipped: bool, chunk: int = 1 << 20) -> int | None:
    """The first record boundary at or after byte ``start``: a gzip member that opens with ``WARC/``
    (per-record .warc.gz), or a ``WARC/1.x`` line (plain .warc). None at the end of the file."""
    pos = start
    while True:
        fh.seek(pos)
        data = fh.read(chunk)
        if not data:
            return None
        if gzipped:
            i = data.find(b"\x1f\x8b\x08")
        else:
            match = _WARC_LINE.search(data)
            i = match.start(1) if match else -1
        if i < 0:
            if len(data) < chunk:
                return None
            pos += chunk - 16  # overlap: a boundary split across two reads is still found
        elif _opens_record(fh, pos + i, gzipped):
            return pos + i
        else:
            pos += i + 1


def _opens_record(fh, offset: int, gzipped: bool) -> bool:
    fh.seek(offset)
    head = fh.read(4096)
    if gzipped:
        try:
            head = zlib.decompressobj(wbits=31).decompress(head, 64)
        except zlib.error:
            return False
    return re.match(rb"WARC/1\.[01]\r?\n", head) is not None


def _intact(fh, offset: int, gzipped: bool) -> bool:
    """Whether the record at ``offset`` ends exactly where its Content-Length says (followed by the
    blank line that closes a record, and, in a gzip member, by nothing else); not when its member is corrupt."""
    fh.seek(offset)
    inflater = zlib.decompressobj(wbits=31) if gzipped else None
    data = b""
    try:
        while True:
            raw = fh.read(1 << 16)
            data += inflater.decompress(raw) if inflater else raw
            end = data.find(b"\r\n\r\n")
            if end >= 0 or not raw:
                break
        match = re.search(rb"\ncontent-length:\s*(\d+)", data[: end + 2], re.IGNORECASE) if end >= 0 else None
        if match is None:
            return False
        record_end = end + 4 + int(match.group(1))
        while len(data) < record_end + 5 and (raw := fh.read(1 << 16)):
            data += inflater.decompress(raw) if inflater else raw
            if inflater and inflater.eof:
                break
    except zlib.error:
        return False
    if data[record_end : record_end + 4] != b"\r\n\r\n":
        return False
    return not gzipped or len(data) == record_end + 4


def _warc_record(record, source: str, cfg: InputConfig) -> tuple[str, str | None, dict]:
    """Decide one record: ("keep", None, row), ("drop", reason, row), ("truncated", ...) when the
    file ends inside it, or ("broken", ...) when its payload runs into the next record."""
    headers = record.headers
    row = {
        "id": (headers.get("WARC-Record-ID") or "").strip("<>") or hash_id(source, record.stream_pos),
        "url": (headers.get("WARC-Target-URI") or "").strip("<>") or None,
        "date": headers.get("WARC-Date"),
        "cc_lang": headers.get("WARC-Identified-Content-Language"),
    }
    rtype = record.record_type
    expected = record.content_length
    # Common Crawl's detected type (from the bytes) first, then what the server declared
    content_type = headers.get("WARC-Identified-Payload-Type") or record.http_content_type
    http = record.http_headers
    if "Content-Length" not in headers and rtype & _DOCUMENT_TYPES:  # cut inside its header block, or malformed
        return "broken", "error:malformed_record", row
    skip = None
    if rtype == WarcRecordType.revisit:
        skip = "revisit"
    elif not rtype & _DOCUMENT_TYPES:
        skip = "not_a_document"
    elif expected > cfg.max_document_bytes:
        skip = "too_large"
    elif rtype == WarcRecordType.response:
        if http is None:  # e.g. dns: records
            skip = "non_html"
        elif http.status_code is None:  # no HTTP status line: cut short (found below) or malformed
            skip = "error:malformed_record"
        elif not 200 <= http.status_code < 300:
            skip = f"http_status:{http.status_code // 100}xx"
        elif content_type and content_type.strip().lower() not in HTML_TYPES:
            skip = "non_html"
    if skip:  # read through it anyway: a short record means the file ends here
        size, embedded = _skip_payload(record) if "Content-Length" in headers else (-1, False)
        if embedded:
            return "broken", "error:bad_content_length", row
        if size < expected:
            return "truncated", "error:truncated", row
        if skip == "not_a_document":
            return "skip", (headers.get("WARC-Type") or "unknown").strip().lower(), row
        return "drop", skip, {**row, "content_type": content_type}
    body = record.reader.read()
    if _EMBEDDED_HEADER.search(body):
        return "broken", "error:bad_content_length", row
    if len(body) < expected:
        return "truncated", "error:truncated", row
    if rtype == WarcRecordType.conversion:  # WET: text already extracted, UTF-8 by specification
        text = body.decode("utf-8", errors="replace").strip()
        if not text:
            return "drop", "empty", row
        return "keep", None, {**row, "text": text, "content_type": "text/plain"}
    body, reason = decode_payload(
        body, http.get("Transfer-Encoding"), http.get("Content-Encoding"), cfg.max_document_bytes
    )
    if reason is None and not body.strip():
        reason = "empty"
    if reason is None and not content_type and not _sniff_html(body):
        reason = "non_html"
    if reason:
        return "drop", reason, {**row, "content_type": content_type}
    charset = record.http_charset or _meta_charset(body)
    return "keep", None, {**row, "html": body, "charset": charset, "content_type": content_type}


def _skip_payload(record, chunk: int = 1 << 20) -> tuple[int, bool]:
    """Read a record's payload without keeping it; return its length and whether it holds the start
    of another record's WARC header (its Content-Length ran too long)."""
    n, embedded, tail = 0, False, b""
    while data := record.reader.read(chunk):
        n += len(data)
        embedded = embedded or _EMBEDDED_HEADER.search(tail + data) is not None
        tail = data[-512:]
    return n, embedded


def _sniff_html(body: bytes) -> bool:
    """For payloads without a declared type."""
    head = body[:1024].lower()
    return b"<html" in head or b"<!doctype html" in head


def _meta_charset(body: bytes) -> str | None:
    match = _META_CHARSET.search(body[:2048])
    return match.group(1).decode("ascii").lower() if match else None


def decode_payload(
    body: bytes, transfer_encoding: str | None, content_encoding: str | None, limit: int
) -> tuple[bytes, str | None]:
    """Undo HTTP chunking and gzip/deflate/br compression, where the bytes still carry them.

    Crawlers often decode the payload but keep the headers (Common Crawl does), so each step runs
    only when the bytes look encoded. Returns (payload, drop reason or None)."""
    if transfer_encoding and "chunked" in transfer_encoding.lower():
        body = dechunk(body)
    encoding = (content_encoding or "").strip().lower()
    try:
        if encoding in ("gzip", "x-gzip", "deflate") and body[:1] in (b"\x1f", b"\x78"):
            inflater = zlib.decompressobj(wbits=47)  # gzip or zlib header, detected
            body = inflater.decompress(body, limit + 1)  # a truncated stream yields what it has
        elif encoding == "br" and not body.lstrip()[:1] == b"<":
            body = brotli.Decompressor().process(body, output_buffer_limit=limit + 1)
    except (zlib.error, brotli.error):
        return b"", "error:content_encoding"
    if len(body) > limit:
        return b"", "too_large"
    return body, None


_CHUNK_HEADER = re.compile(rb"([0-9a-fA-F]+)[^\r\n]*\r?\n")


def dechunk(body: bytes) -> bytes:
    """Decode HTTP chunked transfer encoding leniently: a body that does not start with a chunk
    header is returned as is (already decoded), and broken framing keeps the chunks read so far."""
    out, pos = [], 0
    while pos < len(body):
        match = _CHUNK_HEADER.match(body, pos)
        if match is None:
            return body if not out else b"".join(out) + body[pos:]
        size = int(match.group(1), 16)
        if size == 0:
            break
        start = match.end()
        out.append(body[start : start + size])
        pos = start + size
        pos += 2 if body[pos : pos + 2] == b"\r\n" else (1 if body[pos : pos + 1] == b"\n" else 0)
    return b"".join(out) if out else body
