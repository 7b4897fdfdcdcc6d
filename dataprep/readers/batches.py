"""What every reader fills: kept and dropped rows in READ_SCHEMA, flushed as one StageResult per batch."""

from __future__ import annotations

import gzip
import hashlib
import logging
import time
import zlib
from collections import Counter
from typing import Iterator

import pyarrow as pa

from dataprep.core.stage import DOC_SCHEMA, WEB, ErrorLog, StageResult, mark_dropped
from dataprep.core.stats import StageStats
from dataprep.core.storage import decoded_name

log = logging.getLogger(__name__)

READ_STAGE = "read"  # the stage name of reader skips in stats and dropped rows
# Every reader yields READ_SCHEMA whatever the format (so a job may mix formats): DOC_SCHEMA plus
# ``html`` (raw payload, transfer/content encodings removed), ``charset`` (declared by HTTP or <meta>),
# ``content_type`` (text/plain for WET), ``cc_lang`` (WARC-Identified-Content-Language, if any) and
# ``source_kind`` (web, wikipedia, books, arxiv, stackexchange, code: which cleaning and mixture weight fit it;
# ``source`` stays the input file). ``extract`` turns html + charset into text and drops both columns.
READ_SCHEMA = pa.schema(
    list(DOC_SCHEMA)
    + [
        ("html", pa.binary()),
        ("charset", pa.string()),
        ("content_type", pa.string()),
        ("cc_lang", pa.string()),
        ("source_kind", pa.string()),
    ]
)
# The code reader's rows add where each file lies and what it is (``dataprep.readers.code``).
CODE_READ_SCHEMA = pa.schema(
    list(READ_SCHEMA)
    + [
        ("path", pa.string()),  # the file's path inside its repository
        ("repo", pa.string()),
        ("language", pa.string()),  # None: neither its name nor a #! line says one (code_language drops it)
        ("license", pa.string()),  # SPDX id or expression of the repository's licence; "none" when it names none
        ("size", pa.int64()),  # bytes of the file
    ]
)


def read_schema(input_format: str) -> pa.Schema:
    """The schema readers yield for ``input.format``: code files carry more columns than documents."""
    return CODE_READ_SCHEMA if input_format == "code" else READ_SCHEMA


class Batches:
    """Collects kept and dropped rows; ``flush`` turns them into one StageResult."""

    def __init__(self, source: str, batch_size: int, batch_bytes: int, stats: StageStats | None = None) -> None:
        self.source = decoded_name(source)  # a file name that is not UTF-8 is shown, and stored, decoded
        self.batch_size, self.batch_bytes, self.stats = batch_size, batch_bytes, stats
        self.kind = WEB  # a reader of another source sets its own; a row may carry its own source_kind
        self.schema = READ_SCHEMA  # the code reader's rows have more columns
        self.kept: list[dict] = []
        self.kept_bytes = 0  # payload (html or text) of the kept rows
        self.dropped: list[dict] = []
        self.reasons: list[str] = []
        self.bytes_read = 0  # payload bytes of the records in this batch, kept or dropped
        self.errors = ErrorLog()
        self.counters: Counter = Counter()
        self._t0, self._cpu0 = time.perf_counter(), time.process_time()

    @property
    def rows(self) -> int:
        return len(self.kept) + len(self.dropped)

    def full(self) -> bool:
        # Dropped rows are small (no payload) but a WAT file is nothing else, so they bound a batch too.
        return (
            len(self.kept) >= self.batch_size
            or len(self.dropped) >= 10 * self.batch_size
            or self.kept_bytes >= self.batch_bytes
        )

    def keep(self, **row) -> None:
        self.kept.append({"source": self.source, "source_kind": self.kind, **row})
        self.kept_bytes += len(row.get("html") or row.get("text") or "")

    def keep_text(self, text: str, max_bytes: int, empty: str = "empty", **row) -> None:
        """Keep a text document, or drop it as ``too_large`` (over ``max_bytes`` of UTF-8) or as ``empty``."""
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:  # lone surrogates (JSON escapes): Arrow cannot store them
            text = text.encode("utf-8", errors="surrogatepass").decode("utf-8", errors="replace")
            size = len(text.encode("utf-8"))
        if size > max_bytes:
            self.drop("too_large", **row)
        elif not text.strip():
            self.drop(empty, **row)
        else:
            self.keep(text=text, **row)

    def drop(self, reason: str, exc: BaseException | None = None, **row) -> None:
        row.pop("html", None)
        self.dropped.append({"source": self.source, "source_kind": self.kind, **row})
        self.reasons.append(reason)
        if exc is not None:
            self.errors.add(exc, row.get("id"), with_traceback=False)

    def file_error(self, reason: str, what: str, exc: BaseException | None = None, at: int = 0) -> None:
        """One dropped row for damage to the file itself (``at``: where, so each break has its own id),
        its message naming the file, so the stats say which file to look at."""
        message = f"{self.source}: {what}" + (f": {exc}" if exc is not None and str(exc) else "")
        log.warning("%s (%s)", message, reason)
        self.drop(reason, BadInputFile(message), id=hash_id(self.source, -1 - at))

    def flush(self) -> StageResult:
        kept = pa.Table.from_pylist(self.kept, schema=self.schema)
        dropped = mark_dropped(pa.Table.from_pylist(self.dropped, schema=self.schema), READ_STAGE, self.reasons)
        result = StageResult(kept, dropped)
        if self.stats is not None:
            self.stats.record(
                None,
                result,
                time.perf_counter() - self._t0,
                bytes_in=self.bytes_read,
                cpu_seconds=time.process_time() - self._cpu0,
            )
            self.stats.errors_seen.merge(self.errors)
        self.kept, self.dropped, self.reasons, self.bytes_read, self.kept_bytes, self.errors = (
            [],
            [],
            [],
            0,
            0,
            ErrorLog(),
        )
        return result

    def restart_clock(self) -> None:
        self._t0, self._cpu0 = time.perf_counter(), time.process_time()

    def record_counters(self) -> None:
        if self.stats is not None:
            self.stats.counters.update(self.counters)
        self.counters = Counter()


class BadInputFile(Exception):
    """The error recorded for a damaged or unreadable input file (never raised)."""


def broken_file_reason(exc: BaseException) -> str:
    """The drop reason for an input stream that broke: cut short, bad compressed bytes, or a file that
    cannot be opened (missing, permissions, a symlink loop)."""
    if isinstance(exc, EOFError):
        return "error:truncated"
    if isinstance(exc, (zlib.error, gzip.BadGzipFile)) or "decompression" in str(exc).lower():
        return "error:corrupt_gzip"
    if isinstance(exc, OSError) and exc.errno is not None:
        return "error:unreadable"
    return "error:malformed_record"


def bounded_lines(fh, limit: int) -> Iterator[bytes | None]:
    """The lines of a binary stream, none held past ``limit`` bytes: a longer line (a dump with no line
    breaks, a decompression bomb) is skipped without being held, as None."""
    while line := fh.readline(limit):
        if len(line) >= limit and not line.endswith(b"\n"):
            while (rest := fh.readline(limit)) and not rest.endswith(b"\n"):
                pass
            yield None
        else:
            yield line


def hash_id(source: str, n: int) -> str:
    """Stable id for a document without one: the same file and position give the same id every run."""
    return hashlib.blake2b(f"{source}\0{n}".encode("utf-8", errors="surrogateescape"), digest_size=16).hexdigest()
