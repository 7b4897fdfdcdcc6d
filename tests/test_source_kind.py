"""Every document says which kind of source it came from (``source_kind``); ``source`` stays the input file."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from dataprep.core.config import InputConfig
from dataprep.core.stage import concat
from dataprep.readers import READ_SCHEMA, iter_documents


def read_all(path, **cfg) -> tuple[pa.Table, pa.Table]:
    results = list(iter_documents(str(path), InputConfig(**cfg)))
    return concat(r.kept for r in results), concat(r.dropped for r in results)


def test_web_records_are_web_and_source_stays_the_file(shared_data):
    path = shared_data / "warc/cc-main-2024-22-whirlwind/whirlwind.warc.wet.gz"
    kept, _ = read_all(path)
    assert "source_kind" in READ_SCHEMA.names
    assert kept.num_rows and set(kept.column("source_kind").to_pylist()) == {"web"}
    assert set(kept.column("source").to_pylist()) == {str(path)}


def test_jsonl_and_parquet_keep_a_records_own_source_kind(tmp_path):
    docs = [{"id": "a", "text": "from the web"}, {"id": "b", "text": "an article", "source_kind": "wikipedia"}]
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text("".join(json.dumps(d) + "\n" for d in docs))
    kept, _ = read_all(jsonl)
    assert kept.column("source_kind").to_pylist() == ["web", "wikipedia"]
    parquet = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"id": ["a", "b"], "text": ["from the web", "an article"], "source_kind": [None, "books"]}), parquet)
    kept, _ = read_all(parquet)
    assert kept.column("source_kind").to_pylist() == ["web", "books"]
