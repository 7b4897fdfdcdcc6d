"""Readers: stream one input file into batches of documents, every record kept or dropped with a reason.

Formats: WARC response records (HTML kept as bytes for ``extract``), WET conversion records (text),
JSONL(.gz) / Parquet documents (re-cleaning an existing corpus) and Hugging Face datasets saved to disk
(their Arrow files). Nothing is lost silently: a
response that is not a usable document is a dropped row of stage ``read`` (``non_html``, ``revisit``,
``too_large``, ``empty``, ``http_status:4xx``, ...); records that are no documents at all (WARC
requests, warcinfo, metadata, ...) are counted by record type (``StageStats.records_skipped``), apart
from the documents. A damaged file is never an exception: it keeps what was read before the damage plus
one row whose error message names the file (``error:truncated``, ``error:corrupt_gzip``,
``error:not_warc``, ``error:corrupt_parquet``, ``error:unknown_format``; ``error:unreadable`` for a file
that cannot be opened), so one bad file among many is a counted drop, not a failed job.

A WARC record whose Content-Length is wrong (too long: it swallows the next records' headers; too
short: its leftover bytes break the next header) is dropped as ``error:bad_content_length`` and
reading resumes at the next record boundary (the next gzip member in a per-record ``.warc.gz``, the
next ``WARC/1.x`` header line in a plain ``.warc``), so every good record after it is kept and no
WARC or HTTP header text reaches a document. Empty files are counted (``empty_files``).
"""

from __future__ import annotations

import bz2
import logging
import os
import zlib
from typing import Iterator

from dataprep.core.config import InputConfig
from dataprep.core.inputs import input_folder, refused_link
from dataprep.core.stage import StageResult
from dataprep.core.stats import StageStats
from dataprep.core.storage import open_stream
from dataprep.readers.arxiv import read_arxiv
from dataprep.readers.batches import READ_SCHEMA, READ_STAGE, Batches, broken_file_reason, read_schema
from dataprep.readers.books import read_book
from dataprep.readers.code import expand_code_inputs, read_code
from dataprep.readers.documents import read_arrow, read_jsonl, read_parquet
from dataprep.readers.stackexchange import read_stackexchange
from dataprep.readers.warc import dechunk, decode_payload, read_warc
from dataprep.readers.wikipedia import read_wikipedia

__all__ = [
    "READ_SCHEMA",
    "READ_STAGE",
    "dechunk",
    "decode_payload",
    "detect_format",
    "expand_code_inputs",
    "iter_documents",
    "read_schema",
]

log = logging.getLogger(__name__)


def iter_documents(path: str, cfg: InputConfig, stats: StageStats | None = None) -> Iterator[StageResult]:
    """Stream ``path`` (local or fsspec URL) as batches of about ``cfg.batch_size`` kept documents (fewer
    once their payloads reach ``cfg.batch_bytes``).
    With ``stats``, each batch is counted there (documents, payload bytes read, time, errors)."""
    out = Batches(path, cfg.batch_size, cfg.batch_bytes, stats)
    try:
        fmt = None if _refused_link(path, cfg, out) else _format_to_read(path, cfg, out)
        if fmt is not None:
            for result in _READERS[fmt](path, cfg, out):
                yield result
                out.restart_clock()  # the time the consumer took is not reading time
    finally:
        out.record_counters()
    if out.rows:
        yield out.flush()


_READERS = {
    "warc": read_warc,
    "jsonl": read_jsonl,
    "parquet": read_parquet,
    "arrow": read_arrow,
    "wikipedia": read_wikipedia,
    "stackexchange": read_stackexchange,
    "books": read_book,
    "arxiv": read_arxiv,
    "code": read_code,
}


def _refused_link(path: str, cfg: InputConfig, out: Batches) -> bool:
    """A file found in an input folder through a link that leads outside it (or to a folder) is not read:
    one dropped row naming the link."""
    folder = input_folder(path, cfg.paths)
    reason = refused_link(path, folder) if folder else None
    if reason:
        out.file_error(
            reason,
            f"a link to {os.path.realpath(path)}, not read (only links to files inside the input folder {folder} are)",
        )
    return reason is not None


def _format_to_read(path: str, cfg: InputConfig, out: Batches) -> str | None:
    """The format to read ``path`` as; None once a file with nothing to read is counted (empty,
    unreadable, its first bytes not decompressing, or of no format we know). Code inputs are folders
    too: the code reader counts what it cannot read itself."""
    if cfg.format == "code":
        return "code"
    try:
        if _is_empty(path):
            log.warning("%s: empty file", path)
            out.counters["empty_files"] += 1
            return None
        fmt = detect_format(path, cfg.format)
    except (OSError, EOFError, zlib.error) as exc:
        out.file_error(broken_file_reason(exc), "cannot read the file", exc)
        return None
    if fmt is None:
        out.file_error(
            "error:unknown_format",
            f"not a format it can tell ({', '.join(_READERS)}); set input.format if it is one of them",
        )
    return fmt


def _is_empty(path: str) -> bool:
    """No bytes, or a gzip file holding none."""
    with open_stream(path, decompress=False) as fh:
        head = fh.read(2)
    if not head:
        return True
    if head != b"\x1f\x8b":
        return False
    with open_stream(path) as fh:
        return not fh.read(1)


def detect_format(path: str, declared: str = "auto") -> str | None:
    """``warc`` (also WET/WAT), ``jsonl``, ``parquet``, ``arrow`` (a Hugging Face dataset on disk), ``wikipedia``,
    ``stackexchange``, ``books`` (Project Gutenberg) or ``arxiv`` (LaTeX, tar archives): from the config, the
    extension, else the first bytes."""
    if declared != "auto":
        return "warc" if declared in ("warc", "wet") else declared
    name = path.lower().removesuffix(".gz")
    if name.endswith((".warc", ".wet", ".wat")):
        return "warc"
    if name.endswith((".jsonl", ".json", ".ndjson")):
        return "jsonl"
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith(".arrow"):  # a Hugging Face dataset's save_to_disk files
        return "arrow"
    if name.endswith((".tex", ".tar", ".tgz")):
        return "arxiv"
    with open_stream(path, decompress=False) as fh:
        head = fh.read(4096)
    if head[:2] == b"\x1f\x8b":
        head = zlib.decompressobj(wbits=31).decompress(head, 4096)
    elif head[:3] == b"BZh":  # a bz2 block decompresses only whole (up to 900 kB)
        with open_stream(path, decompress=False) as fh:
            head = bz2.BZ2File(fh).read(4096)
    if head.startswith(b"WARC/"):
        return "warc"
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith(b"ARROW1"):
        return "arrow"
    if head.lstrip().startswith(b"{"):
        return "jsonl"
    if b"<mediawiki" in head:
        return "wikipedia"
    if b"<posts>" in head:
        return "stackexchange"
    if b"Project Gutenberg" in head:
        return "books"
    return None
