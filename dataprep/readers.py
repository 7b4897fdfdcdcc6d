"""Readers: stream one input file into batches of documents, every record kept or dropped with a reason.

Formats: WARC response records (HTML kept as bytes for ``extract``), WET conversion records (text),
and JSONL(.gz) / Parquet documents (re-cleaning an existing corpus). Nothing is lost silently: a
record that is not a usable document is a dropped row of stage ``read`` (``non_html``, ``revisit``,
``not_response``, ``too_large``, ``empty``, ``http_status:4xx``, ...), and a file that breaks part
way keeps what was read before the break plus one ``error:truncated`` / ``error:malformed_record`` row.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import zlib
from typing import Iterator

import brotli  # a FastWARC dependency
import pyarrow as pa
import pyarrow.parquet as pq
from fastwarc.warc import ArchiveIterator, WarcRecordType

from dataprep.config import InputConfig
from dataprep.io import open_stream
from dataprep.stage import DOC_SCHEMA, StageResult, mark_dropped

log = logging.getLogger(__name__)

READ_STAGE = "read"  # the stage name of reader skips in stats and dropped rows
# Every reader yields READ_SCHEMA whatever the format (so a job may mix formats): DOC_SCHEMA plus
# ``html`` (raw payload, transfer/content encodings removed), ``charset`` (declared by HTTP or <meta>),
# ``content_type`` (text/plain for WET) and ``cc_lang`` (WARC-Identified-Content-Language, if any).
# ``extract`` turns html + charset into text and drops both columns.
READ_SCHEMA = pa.schema(
    list(DOC_SCHEMA)
    + [
        ("html", pa.binary()),
        ("charset", pa.string()),
        ("content_type", pa.string()),
        ("cc_lang", pa.string()),
    ]
)
HTML_TYPES = {"text/html", "application/xhtml+xml"}
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([a-zA-Z0-9_.:-]+)""", re.IGNORECASE)


def iter_documents(path: str, cfg: InputConfig) -> Iterator[StageResult]:
    """Stream ``path`` (local or fsspec URL) as batches of about ``cfg.batch_size`` kept documents."""
    out = _Batches(path, cfg.batch_size)
    try:
        fmt = detect_format(path, cfg.format)
        reader = {"warc": _read_warc, "jsonl": _read_jsonl, "parquet": _read_parquet}.get(fmt)
        if reader is None:
            log.warning("cannot tell the format of %s; set input.format", path)
            out.drop("error:unknown_format", id=_hash_id(path, 0))
        else:
            yield from reader(path, cfg, out)
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"input file not found: {path}") from exc
    if out.rows:
        yield out.flush()


def detect_format(path: str, declared: str = "auto") -> str | None:
    """``warc`` (also WET/WAT), ``jsonl`` or ``parquet``: from the config, the extension, else the first bytes."""
    if declared != "auto":
        return "warc" if declared in ("warc", "wet") else declared
    name = path.lower().removesuffix(".gz")
    if name.endswith((".warc", ".wet", ".wat")):
        return "warc"
    if name.endswith((".jsonl", ".json", ".ndjson")):
        return "jsonl"
    if name.endswith(".parquet"):
        return "parquet"
    with open_stream(path, decompress=False) as fh:
        head = fh.read(4096)
    if head[:2] == b"\x1f\x8b":
        head = zlib.decompressobj(wbits=31).decompress(head, 64)
    if head.startswith(b"WARC/"):
        return "warc"
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.lstrip().startswith(b"{"):
        return "jsonl"
    return None


class _Batches:
    """Collects kept and dropped rows; ``flush`` turns them into one StageResult."""

    def __init__(self, source: str, batch_size: int) -> None:
        self.source, self.batch_size = source, batch_size
        self.kept: list[dict] = []
        self.dropped: list[dict] = []
        self.reasons: list[str] = []

    @property
    def rows(self) -> int:
        return len(self.kept) + len(self.dropped)

    def full(self) -> bool:
        # Dropped rows are small (no payload) but a WAT file is nothing else, so they bound a batch too.
        return len(self.kept) >= self.batch_size or len(self.dropped) >= 10 * self.batch_size

    def keep(self, **row) -> None:
        self.kept.append({"source": self.source, **row})

    def drop(self, reason: str, **row) -> None:
        row.pop("html", None)
        self.dropped.append({"source": self.source, **row})
        self.reasons.append(reason)

    def flush(self) -> StageResult:
        kept = pa.Table.from_pylist(self.kept, schema=READ_SCHEMA)
        dropped = mark_dropped(pa.Table.from_pylist(self.dropped, schema=READ_SCHEMA), READ_STAGE, self.reasons)
        self.kept, self.dropped, self.reasons = [], [], []
        return StageResult(kept, dropped)


def _hash_id(source: str, n: int) -> str:
    """Stable id for a document without one: the same file and position give the same id every run."""
    return hashlib.blake2b(f"{source}\0{n}".encode(), digest_size=16).hexdigest()


# ---------------------------------------------------------------------------------------------
# WARC / WET


_DOCUMENT_TYPES = WarcRecordType.response | WarcRecordType.conversion


def _read_warc(path: str, cfg: InputConfig, out: _Batches) -> Iterator[StageResult]:
    with open_stream(path, decompress=False) as fh:  # FastWARC detects gzip itself, per member or not
        try:
            for record in ArchiveIterator(fh, record_types=WarcRecordType.any_type, parse_http=True):
                if out.full():
                    yield out.flush()
                try:
                    if _warc_record(record, path, cfg, out) == "stop":
                        return
                except Exception as exc:  # noqa: BLE001 - one odd record must not end the file
                    out.drop(f"error:{type(exc).__name__}", id=_hash_id(path, record.stream_pos))
        except (OSError, ValueError, EOFError, zlib.error) as exc:  # the stream itself broke
            reason = "error:truncated" if isinstance(exc, EOFError) else "error:malformed_record"
            log.warning("%s: %s after %d rows: %s", path, reason, out.rows, exc)
            out.drop(reason, id=_hash_id(path, -1))


def _warc_record(record, source: str, cfg: InputConfig, out: _Batches) -> str | None:
    """Keep or drop one record; return "stop" when the file ends inside it (truncated)."""
    headers = record.headers
    row = {
        "id": (headers.get("WARC-Record-ID") or "").strip("<>") or _hash_id(source, record.stream_pos),
        "url": (headers.get("WARC-Target-URI") or "").strip("<>") or None,
        "date": headers.get("WARC-Date"),
        "cc_lang": headers.get("WARC-Identified-Content-Language"),
    }
    rtype = record.record_type
    expected = record.content_length
    # Common Crawl's detected type (from the bytes) first, then what the server declared
    content_type = headers.get("WARC-Identified-Payload-Type") or record.http_content_type
    http = record.http_headers
    skip = None
    if rtype == WarcRecordType.revisit:
        skip = "revisit"
    elif not rtype & _DOCUMENT_TYPES:
        skip = "not_response"
    elif expected > cfg.max_document_bytes:
        skip = "too_large"
    elif rtype == WarcRecordType.response:
        if http is None:  # e.g. dns: records
            skip = "non_html"
        elif not 200 <= http.status_code < 300:
            skip = f"http_status:{http.status_code // 100}xx"
        elif content_type and content_type.strip().lower() not in HTML_TYPES:
            skip = "non_html"
    if skip:  # read through it anyway: a short record means the file ends here
        if "Content-Length" not in headers or _skip_payload(record) < expected:
            out.drop("error:truncated", **row)
            return "stop"
        return out.drop(skip, content_type=content_type, **row)
    body = record.reader.read()
    if len(body) < expected:
        out.drop("error:truncated", **row)
        return "stop"
    if rtype == WarcRecordType.conversion:  # WET: text already extracted, UTF-8 by specification
        text = body.decode("utf-8", errors="replace").strip()
        if not text:
            return out.drop("empty", **row)
        return out.keep(text=text, content_type="text/plain", **row)
    body, reason = decode_payload(body, http.get("Transfer-Encoding"), http.get("Content-Encoding"), cfg.max_document_bytes)
    if reason is None and not body.strip():
        reason = "empty"
    if reason is None and not content_type and not _sniff_html(body):
        reason = "non_html"
    if reason:
        return out.drop(reason, content_type=content_type, **row)
    charset = record.http_charset or _meta_charset(body)
    return out.keep(html=body, charset=charset, content_type=content_type, **row)


def _skip_payload(record, chunk: int = 1 << 20) -> int:
    """Read a record's payload without keeping it; return its length."""
    n = 0
    while data := record.reader.read(chunk):
        n += len(data)
    return n


def _sniff_html(body: bytes) -> bool:
    """For payloads without a declared type."""
    head = body[:1024].lower()
    return b"<html" in head or b"<!doctype html" in head


def _meta_charset(body: bytes) -> str | None:
    match = _META_CHARSET.search(body[:2048])
    return match.group(1).decode("ascii").lower() if match else None


def decode_payload(body: bytes, transfer_encoding: str | None, content_encoding: str | None, limit: int) -> tuple[bytes, str | None]:
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


# ---------------------------------------------------------------------------------------------
# JSONL / Parquet documents


def _text_document(out: _Batches, cfg: InputConfig, n: int, text, doc_id, url, date) -> None:
    row = {
        "id": str(doc_id) if doc_id not in (None, "") else _hash_id(out.source, n),
        "url": url if isinstance(url, str) else None,
        "date": str(date) if date is not None else None,
    }
    if text is None:
        return out.drop(f"missing_field:{cfg.text_field}", **row)
    if not isinstance(text, str):
        return out.drop("error:malformed_record", **row)
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:  # lone surrogates from JSON escapes: Arrow cannot store them
        text = text.encode("utf-8", errors="surrogatepass").decode("utf-8", errors="replace")
        size = len(text.encode("utf-8"))
    if size > cfg.max_document_bytes:
        return out.drop("too_large", **row)
    if not text.strip():
        return out.drop("empty", **row)
    out.keep(text=text, **row)


def _read_jsonl(path: str, cfg: InputConfig, out: _Batches) -> Iterator[StageResult]:
    limit = cfg.max_document_bytes * 2 + 65536  # JSON escaping can double the text's size
    n = 0
    with open_stream(path) as fh:
        try:
            while line := fh.readline(limit):
                if out.full():
                    yield out.flush()
                n += 1
                if len(line) >= limit and not line.endswith(b"\n"):
                    while (rest := fh.readline(limit)) and not rest.endswith(b"\n"):
                        pass  # skip the rest of an enormous line without holding it
                    out.drop("too_large", id=_hash_id(path, n))
                    continue
                if not line.strip():
                    continue
                try:
                    doc = json.loads(line.decode("utf-8", errors="replace"))
                except ValueError:
                    doc = None
                if not isinstance(doc, dict):
                    out.drop("error:malformed_record", id=_hash_id(path, n))
                    continue
                date = doc.get("date", doc.get("created"))
                _text_document(out, cfg, n, doc.get(cfg.text_field), doc.get(cfg.id_field), doc.get("url"), date)
        except (EOFError, OSError, zlib.error) as exc:  # truncated or corrupt gzip: keep what was read
            reason = "error:truncated" if isinstance(exc, EOFError) else "error:malformed_record"
            log.warning("%s: %s after line %d: %s", path, reason, n, exc)
            out.drop(reason, id=_hash_id(path, -1))


def _read_parquet(path: str, cfg: InputConfig, out: _Batches) -> Iterator[StageResult]:
    with open_stream(path, decompress=False) as fh:
        try:
            parquet = pq.ParquetFile(fh)
        except (pa.ArrowException, OSError) as exc:
            log.warning("%s: unreadable Parquet file: %s", path, exc)
            out.drop("error:malformed_record", id=_hash_id(path, -1))
            return
        names = parquet.schema_arrow.names
        if cfg.text_field not in names:
            raise ValueError(f"{path}: no column {cfg.text_field!r} (input.text_field); columns: {', '.join(names)}")
        wanted = {"text": cfg.text_field, "id": cfg.id_field, "url": "url", "date": "date"}
        columns = sorted({c for c in wanted.values() if c in names})
        n = 0
        try:
            for batch in parquet.iter_batches(batch_size=cfg.batch_size, columns=columns):
                data = batch.to_pydict()
                values = {k: data.get(c, [None] * batch.num_rows) for k, c in wanted.items()}
                for text, doc_id, url, date in zip(values["text"], values["id"], values["url"], values["date"]):
                    n += 1
                    _text_document(out, cfg, n, text, doc_id, url, date)
                if out.full():
                    yield out.flush()
        except (pa.ArrowException, OSError) as exc:
            log.warning("%s: Parquet read failed after %d rows: %s", path, n, exc)
            out.drop("error:malformed_record", id=_hash_id(path, -1))

