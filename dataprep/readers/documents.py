"""JSONL(.gz) and Parquet documents (re-cleaning an existing corpus)."""

from __future__ import annotations

import json
import zlib
from typing import Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dataprep.core.config import InputConfig
from dataprep.core.errors import UsageError
from dataprep.core.stage import StageResult
from dataprep.core.storage import open_stream
from dataprep.readers.batches import Batches, broken_file_reason, hash_id

# ---------------------------------------------------------------------------------------------
# JSONL / Parquet documents


def _text_document(out: Batches, cfg: InputConfig, n: int, text, doc_id, url, date, kind=None) -> None:
    row = {
        "id": str(doc_id) if doc_id not in (None, "") else hash_id(out.source, n),
        "url": url if isinstance(url, str) else None,
        "date": str(date) if date is not None else None,
    }
    if isinstance(kind, str) and kind:  # a corpus this toolkit wrote keeps each record's source kind
        row["source_kind"] = kind
    if text is None:
        return out.drop(f"missing_field:{cfg.text_field}", **row)
    if not isinstance(text, str):
        return out.drop("error:malformed_record", **row)
    out.keep_text(text, cfg.max_document_bytes, **row)


def read_jsonl(path: str, cfg: InputConfig, out: Batches) -> Iterator[StageResult]:
    def document(doc: dict, n: int) -> None:
        _text_document(
            out,
            cfg,
            n,
            doc.get(cfg.text_field),
            doc.get(cfg.id_field),
            doc.get("url"),
            doc.get("date", doc.get("created")),
            doc.get("source_kind"),
        )

    yield from jsonl_records(path, cfg, out, document)


def jsonl_records(
    path: str, cfg: InputConfig, out: Batches, handle: Callable[[dict, int], None], count_lines: bool = True
) -> Iterator[StageResult]:
    """Call ``handle(record, line number)`` for each JSON object of a JSON Lines file, yielding full batches.
    A line too long to be a document is skipped without being held (``too_large``), one that is not a JSON
    object is counted (``error:malformed_record``), and a cut or corrupt gzip keeps what was read. The
    lines' bytes count as read unless ``handle`` counts the payload itself (``count_lines=False``)."""
    limit = cfg.max_document_bytes * 2 + 65536  # JSON escaping can double the text's size
    n = 0
    with open_stream(path) as fh:
        try:
            while line := fh.readline(limit):
                if out.full():
                    yield out.flush()
                n += 1
                out.bytes_read += len(line) if count_lines else 0
                if len(line) >= limit and not line.endswith(b"\n"):
                    while (rest := fh.readline(limit)) and not rest.endswith(b"\n"):
                        pass  # skip the rest of an enormous line without holding it
                    out.drop("too_large", id=hash_id(path, n))
                    continue
                if not line.strip():
                    continue
                try:
                    record = json.loads(line.decode("utf-8", errors="replace"))
                except ValueError:
                    record = None
                if not isinstance(record, dict):
                    out.drop("error:malformed_record", id=hash_id(path, n))
                    continue
                handle(record, n)
        except (EOFError, OSError, zlib.error) as exc:  # truncated or corrupt gzip: keep what was read
            out.file_error(broken_file_reason(exc), f"reading stopped after line {n}", exc)


def read_parquet(path: str, cfg: InputConfig, out: Batches) -> Iterator[StageResult]:
    with open_stream(path, decompress=False) as fh:
        try:
            parquet = pq.ParquetFile(fh)
        except (pa.ArrowException, OSError) as exc:  # no Parquet footer: not Parquet, or cut short
            out.file_error("error:corrupt_parquet", "not a readable Parquet file", exc)
            return
        columns = _columns(path, cfg, parquet.schema_arrow.names)
        yield from _table_documents(
            parquet.iter_batches(batch_size=cfg.batch_size, columns=columns), cfg, out, "error:corrupt_parquet"
        )


def read_arrow(path: str, cfg: InputConfig, out: Batches) -> Iterator[StageResult]:
    """Arrow IPC files, as a Hugging Face dataset's ``save_to_disk`` writes them (stream format) or the
    random-access file format."""
    with open_stream(path, decompress=False) as fh:
        try:
            head = fh.read(6)
            fh.seek(0)
            reader = pa.ipc.open_file(fh) if head == b"ARROW1" else pa.ipc.open_stream(fh)
        except (pa.ArrowException, OSError) as exc:
            out.file_error("error:corrupt_arrow", "not a readable Arrow IPC file", exc)
            return
        columns = _columns(path, cfg, reader.schema.names)
        if isinstance(reader, pa.ipc.RecordBatchFileReader):
            batches = (reader.get_batch(i).select(columns) for i in range(reader.num_record_batches))
        else:
            batches = (batch.select(columns) for batch in reader)
        yield from _table_documents(batches, cfg, out, "error:corrupt_arrow")


def _columns(path: str, cfg: InputConfig, names: list[str]) -> list[str]:
    """The columns a document needs, by ``input.text_field`` / ``input.id_field``; a missing text column is a
    config error naming the columns there are."""
    if cfg.text_field not in names:
        raise UsageError(f"{path}: no column {cfg.text_field!r} (input.text_field); columns: {', '.join(names)}")
    return sorted({c for c in _wanted(cfg).values() if c in names})


def _wanted(cfg: InputConfig) -> dict[str, str]:
    return {"text": cfg.text_field, "id": cfg.id_field, "url": "url", "date": "date", "source_kind": "source_kind"}


def _table_documents(batches, cfg: InputConfig, out: Batches, damaged: str) -> Iterator[StageResult]:
    """Rows of columnar batches as documents; a file that breaks part-way keeps the rows read before."""
    wanted, n = _wanted(cfg), 0
    try:
        for batch in batches:
            out.bytes_read += int(pc.sum(pc.binary_length(batch.column(cfg.text_field))).as_py() or 0)
            data = batch.to_pydict()
            values = {k: data.get(c, [None] * batch.num_rows) for k, c in wanted.items()}
            for text, doc_id, url, date, kind in zip(*values.values()):
                if out.full():  # per row: batch_bytes can end a batch inside a read batch
                    yield out.flush()
                n += 1
                _text_document(out, cfg, n, text, doc_id, url, date, kind)
    except (pa.ArrowException, OSError) as exc:
        out.file_error(damaged, f"reading stopped after row {n}", exc)
