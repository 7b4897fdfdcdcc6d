"""Messy-input cases for the cleaning pipeline: each writes its own fixture into a folder, runs the real
reader or stage on it and returns what happened (kept ids, drop reasons, counters).

``tests/pipelines/test_fault_injection.py`` asserts on these outcomes; ``bench/faults/bench_faults.py`` (run from the
repository root, importing ``tests.support.fault_cases``) runs each in a fresh process and prints its outcome, time
and peak RSS.
"""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

import pyarrow as pa

from dataprep.core.config import InputConfig
from dataprep.core.stage import DROP_REASON, concat
from dataprep.core.stats import StageStats
from dataprep.readers import iter_documents
from dataprep.readers.warc_writer import warc_record

GOOD_PAGES = 6


def page(i: int) -> bytes:
    return (
        f"<html><head><title>Page {i}</title></head><body><article><p>Document number {i} tells a short story "
        f"about the harbour, the boats and the people who mend their nets every morning.</p></article></body></html>"
    ).encode()


def response_record(i: int, body: bytes, length_error: int = 0, headers: str = "Content-Type: text/html") -> bytes:
    """One WARC response record; ``length_error`` bytes added to its Content-Length (negative: too short)."""
    http = f"HTTP/1.1 200 OK\r\n{headers}\r\n\r\n".encode() + body
    fields = {
        "WARC-Record-ID": f"<urn:uuid:00000000-0000-0000-0000-{i:012d}>",
        "WARC-Date": "2024-05-18T01:58:10Z",
        "WARC-Target-URI": f"https://example.org/{i}",
        "Content-Type": "application/http; msgtype=response",
    }
    return warc_record("response", fields, http, version="1.0", length_error=length_error)


def write_warc(path: Path, records: list[bytes], gzipped: bool) -> Path:
    """A plain .warc, or a .warc.gz with one gzip member per record (as Common Crawl writes them)."""
    data = b"".join(gzip.compress(r) for r in records) if gzipped else b"".join(records)
    path.write_bytes(data)
    return path


def read(path: Path, **cfg) -> dict:
    """Every batch of ``iter_documents``: kept ids, drop reasons, read stats, and whether any kept payload
    carries WARC or HTTP header text."""
    stats = StageStats("read")
    results = list(iter_documents(str(path), InputConfig(**cfg), stats))
    kept = concat(r.kept for r in results) if results else pa.table({})
    dropped = concat(r.dropped for r in results) if results else pa.table({})
    payloads = [h or b"" for h in kept.column("html").to_pylist()] if kept.num_rows else []
    return {
        "kept": [i.rsplit("-", 1)[-1].lstrip("0") or "0" for i in kept.column("id").to_pylist()]
        if kept.num_rows
        else [],
        "dropped": dict(Counter(dropped.column(DROP_REASON).to_pylist())) if dropped.num_rows else {},
        "header_text_leaked": any(b"WARC/1.0" in p or b"HTTP/1.1" in p or b"WARC-Type" in p for p in payloads),
        "counters": dict(stats.counters),
        "bytes_in": stats.bytes_in,
        "error_messages": dict(stats.errors_seen.messages),
    }


def bad_content_length(folder: Path, length_error: int, broken: int, gzipped: bool) -> dict:
    """Record ``broken`` of GOOD_PAGES declares a Content-Length ``length_error`` bytes off."""
    records = [response_record(i, page(i), length_error if i == broken else 0) for i in range(GOOD_PAGES)]
    name = f"bad-length{length_error:+d}-at{broken}.warc" + (".gz" if gzipped else "")
    return read(write_warc(folder / name, records, gzipped))


def empty_files(folder: Path) -> dict:
    """A zero-byte file and an empty gzip file: counted, nothing else."""
    (folder / "zero.warc").write_bytes(b"")
    (folder / "empty.warc.gz").write_bytes(gzip.compress(b""))
    outcomes = [read(folder / "zero.warc"), read(folder / "empty.warc.gz")]
    return {
        "empty_files": sum(o["counters"].get("empty_files", 0) for o in outcomes),
        "kept": sum(len(o["kept"]) for o in outcomes),
    }


def extract_batch(folder: Path, pages: list[bytes], charset: str | None = None, **params) -> dict:
    """Pages through the read stage (a WARC written here) and then the real extract stage."""
    from dataprep.html.extract import Extract

    header = "Content-Type: text/html" + (f"; charset={charset}" if charset else "")
    path = write_warc(
        folder / "pages.warc.gz", [response_record(i, p, headers=header) for i, p in enumerate(pages)], True
    )
    batch = concat(r.kept for r in iter_documents(str(path), InputConfig()))
    stage = Extract(**params)
    stats = StageStats("extract")
    result = stage.apply(batch)
    stats.record(batch, result)
    stats.record_counters(stage)
    return {
        "texts": result.kept.column("text").to_pylist(),
        "dropped": dict(Counter(result.dropped.column(DROP_REASON).to_pylist())) if result.dropped.num_rows else {},
        "counters": dict(stats.counters),
        "bytes_in": stats.bytes_in,
    }


def charset_lie(folder: Path) -> dict:
    """Latin-1 bytes that declare UTF-16 (even length, so UTF-16 'decodes' them into CJK garbage)."""
    text = "Café crème brûlée, naïve façade à la carte, déjà vu at the harbour. " * 8
    body = f"<html><head><meta charset=utf-16></head><body><article><p>{text}</p></article></body></html>".encode(
        "latin-1"
    )
    body += b" " * (len(body) % 2)
    return extract_batch(folder, [body], charset="utf-16", engine="resiliparse")


def replacement_chars(folder: Path) -> dict:
    """A page of bytes no charset decodes (many U+FFFD) beside a clean one; the rule drops the first."""
    garbled = b"<html><body><p>" + bytes(range(0x80, 0x100)) * 20 + b" some words</p></body></html>"
    return extract_batch(folder, [garbled, page(1)], charset="utf-8", engine="resiliparse", max_replacement_share=0.2)


def trafilatura_timeout(folder: Path) -> dict:
    """A large page Trafilatura cannot finish within the limit, beside a small one it can."""
    rows = "".join(f"<tr><td>cell {i}</td><td>value {i * 7}</td><td>note {i}</td></tr>" for i in range(40000))
    big = f"<html><body><table>{rows}</table></body></html>".encode()
    return extract_batch(folder, [big, page(1)], engine="trafilatura", trafilatura_timeout=0.5)
