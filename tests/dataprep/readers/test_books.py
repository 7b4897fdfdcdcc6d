"""Plain-text books: Gutenberg's header, footer and licence cut, the book kept whole by the ``books`` preset
where the web's Gopher/C4 rules cut it, and the preset on Spark with a damaged file counted
and a rerun after a crash."""

from __future__ import annotations

import gzip
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dataprep.core.config import InputConfig, load_config
from dataprep.core.runner import run_stages
from dataprep.core.stage import concat
from dataprep.quality.books import BooksQuality
from dataprep.readers import detect_format, iter_documents
from dataprep.readers.books import strip_gutenberg
from pipelines.pipeline_run import run_pipeline
from resume import rerun_after_a_crash

SAMPLE = Path(__file__).resolve().parents[2] / "data/books/pg99999-lamplighter.txt"
BOILERPLATE = ("Project Gutenberg", "gutenberg.org", "License", "LICENSE", "Release date", "Credits:", "*** ")


def read_all(path, **cfg) -> tuple[pa.Table, pa.Table]:
    results = list(iter_documents(str(path), InputConfig(**cfg)))
    return concat(r.kept for r in results), concat(r.dropped for r in results)


def the_book() -> str:
    """The sample's text between its START and END lines, as the author wrote it."""
    text = SAMPLE.read_text()
    return text.split("***\n", 1)[1].split("*** END")[0].strip() + "\n"


def test_the_book_is_kept_whole_without_gutenberg_text():
    assert detect_format(str(SAMPLE)) == "books"
    kept, dropped = read_all(SAMPLE)
    row = kept.to_pylist()[0]
    assert (row["id"], row["url"], row["source_kind"]) == (
        "gutenberg-99999",
        "https://www.gutenberg.org/ebooks/99999",
        "books",
    )
    assert row["text"] == the_book()
    assert [b for b in BOILERPLATE if b in row["text"]] == []
    assert "CHAPTER III" in row["text"] and "  Before the dark comes over the wall" in row["text"]


def test_older_gutenberg_boilerplate_is_stripped():
    old = (
        "The Project Gutenberg Etext of Old Tales\n\n*END*THE SMALL PRINT! FOR PUBLIC DOMAIN "
        "ETEXTS*Ver.04.29.93*END*\n\n"
        "Produced by A. Volunteer\n\nOLD TALES\n\nOnce there was a mill.\n\nEnd of Project Gutenberg's Old "
        "Tales\n\nMore licence.\n"
    )
    assert strip_gutenberg(old) == "OLD TALES\n\nOnce there was a mill.\n"


def test_a_book_from_elsewhere_is_left_as_it_is():
    assert strip_gutenberg("A book from elsewhere.\n") == "A book from elsewhere.\n"


def test_books_preset_keeps_the_book_the_web_rules_cut():
    kept, _ = read_all(SAMPLE)
    as_web = kept.set_column(kept.column_names.index("source_kind"), "source_kind", pa.array(["web"]))
    web = run_stages(load_config("gopher_c4").stages, as_web)[0]  # the web's rules, had it come as a web page
    web_text = web.kept.column("text")[0].as_py() if web.kept.num_rows else ""
    assert len(web_text) < len(the_book()) / 2  # hard-wrapped prose, verse, titles: lines C4 removes
    books = load_config("books").stages
    assert [s.name for s in books][0] == "books_quality"
    result = run_stages(books[:1], kept)[0]
    assert result.kept.column("text").to_pylist() == [the_book()]


def test_books_quality_rules():
    rules = BooksQuality(min_words=20)
    prose = "The lamplighter walked along the quay and lit every lamp before the dark came down. " * 3
    assert [
        rules.decide(t)
        for t in (prose, "Too short a text.", "12 34 56 78 90 " * 10 + prose[:60], "A running head line\n" * 40 + prose)
    ] == [None, "too_short", "not_prose", "repeated_lines"]


def test_books_preset_on_spark_counts_a_damaged_file(spark, tmp_path):
    books = tmp_path / "books"
    books.mkdir()
    (books / "pg99999.txt").write_bytes(SAMPLE.read_bytes())
    (books / "pg99998.txt.gz").write_bytes(gzip.compress(SAMPLE.read_bytes().replace(b"99999", b"99998")))
    (books / "note.txt").write_text("A note, not a book.\n")
    damaged = gzip.compress(SAMPLE.read_bytes())
    (books / "pg99997.txt.gz").write_bytes(damaged[: len(damaged) // 2])
    config = load_config(
        "books", overrides={"input": {"paths": [str(books)]}, "output": {"dir": str(tmp_path / "out")}}
    )
    result = run_pipeline(config, spark=spark)
    stats = {s.stage: s for s in result.stats}
    assert stats["read"].dropped == {"error:truncated": 1}
    assert stats["books_quality"].dropped == {"too_short": 1}
    assert sum(stats["exact_dedup"].dropped.values()) == 1  # the two editions hold the same book
    rows = pq.read_table(result.corpus_dir).to_pylist()
    assert [r["source_kind"] for r in rows] == ["books"] and rows[0]["id"] in ("gutenberg-99998", "gutenberg-99999")
    assert rows[0]["text"] == the_book() and rows[0]["num_tokens"] > 0
    assert (tmp_path / "out" / "shards" / "manifest.json").is_file()
    assert (
        pq.read_table(rerun_after_a_crash(config, spark).corpus_dir).to_pylist() == rows
    )  # killed with two of four files read
