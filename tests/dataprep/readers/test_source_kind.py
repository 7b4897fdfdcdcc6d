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


def test_web_records_are_of_kind_web(shared_data):
    kept, _ = read_all(shared_data / "warc/cc-main-2024-22-whirlwind/whirlwind.warc.wet.gz")
    assert "source_kind" in READ_SCHEMA.names
    assert kept.num_rows and set(kept.column("source_kind").to_pylist()) == {"web"}


def test_a_web_records_source_stays_its_file(shared_data):
    path = shared_data / "warc/cc-main-2024-22-whirlwind/whirlwind.warc.wet.gz"
    kept, _ = read_all(path)
    assert kept.num_rows and set(kept.column("source").to_pylist()) == {str(path)}


def test_jsonl_keeps_a_records_own_source_kind(tmp_path):
    docs = [{"id": "a", "text": "from the web"}, {"id": "b", "text": "an article", "source_kind": "wikipedia"}]
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text("".join(json.dumps(d) + "\n" for d in docs))
    kept, _ = read_all(jsonl)
    assert kept.column("source_kind").to_pylist() == ["web", "wikipedia"]


def test_parquet_keeps_a_records_own_source_kind(tmp_path):
    parquet = tmp_path / "docs.parquet"
    pq.write_table(
        pa.table({"id": ["a", "b"], "text": ["from the web", "an article"], "source_kind": [None, "books"]}), parquet
    )
    kept, _ = read_all(parquet)
    assert kept.column("source_kind").to_pylist() == ["web", "books"]


def test_each_sources_rules_judge_only_their_source_kind():
    """In a job mixing sources, the web's rules leave a book alone (they would cut it) and the books' and
    Wikipedia's rules leave web pages alone, unless their ``source_kinds`` say otherwise."""
    from pathlib import Path

    from dataprep.core.config import load_config, parse_stages
    from dataprep.core.runner import run_stages

    book, _ = read_all(Path(__file__).resolve().parents[2] / "data/books/pg99999-lamplighter.txt")
    web = pa.table(
        {"id": ["w"], "url": [None], "date": [None], "source": ["x"], "text": ["Buy now"], "source_kind": [None]}
    )
    mixed = concat([book.select(web.column_names), web.cast(book.select(web.column_names).schema)])
    web_rules = load_config("gopher_c4").stages
    kept = run_stages(web_rules, mixed)[0].kept
    assert kept.column("id").to_pylist() == ["gutenberg-99999"] and kept.column("text")[0] == book.column("text")[0]
    asked = parse_stages([{"stage": "c4_quality", "source_kinds": ["web", "books"]}])
    cut = run_stages(asked, mixed)[0].kept.column("text")[0].as_py()  # C4 now cuts the book's unpunctuated lines
    assert len(cut) < len(book.column("text")[0].as_py()) / 2
    for stage in ({"stage": "books_quality"}, {"stage": "wikipedia_quality"}):
        kept = run_stages(parse_stages([stage]), mixed)[0].kept
        assert "w" in kept.column("id").to_pylist()
