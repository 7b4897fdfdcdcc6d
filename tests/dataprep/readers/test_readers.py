"""Readers on the real WARC/WET/WAT samples, the malformed fixtures, JSONL/Parquet documents, and damaged, misnamed,
empty or unreadable input files (alone, and in a run beside good ones)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataprep.core.config import InputConfig, load_config
from dataprep.core.stage import DROP_REASON, DROP_STAGE, concat
from dataprep.core.stats import StageStats
from dataprep.readers import READ_STAGE, dechunk, decode_payload, detect_format, iter_documents
from dataprep.readers.warc_writer import record_id, warc_record
from pipelines.pipeline_run import run_pipeline

CC14 = "warc/cc-main-2014-35-head/CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc"

# Per file: kept documents and dropped rows by reason, then the records that are no documents, skipped
# by record type apart from them. Every record of SOURCES.md's table is accounted for (e.g. IAH: 1
# warcinfo + 16 request + 3 resource skipped, and its 16 responses = 2 kept + 9 redirects + 5
# non-HTML: robots.txt, jpeg, gif, png, rss).
EXPECTED = {
    CC14: (
        {"kept": 3, "empty": 1},
        {"metadata": 4, "request": 4, "warcinfo": 1},
    ),  # the 4th response: an empty redirect, no type
    CC14 + ".wet": ({"kept": 3}, {"warcinfo": 1}),
    CC14 + ".wat": ({}, {"metadata": 8, "warcinfo": 1}),
    "warc/cc-main-2024-22-whirlwind/whirlwind.warc.gz": ({"kept": 1}, {"metadata": 1, "request": 1, "warcinfo": 1}),
    "warc/cc-main-2024-22-whirlwind/whirlwind.warc.wet.gz": ({"kept": 1}, {"warcinfo": 1}),
    "warc/cc-main-2024-22-whirlwind/whirlwind.warc.wat.gz": ({}, {"metadata": 1, "warcinfo": 1}),
    "warc/wget/IAH-urls-wget.warc.gz": (
        {"kept": 2, "http_status:3xx": 9, "non_html": 5},
        {"request": 16, "resource": 3, "warcinfo": 1},
    ),
    "warc/wget/dolma-sample-0000.warc.gz": ({"kept": 22}, {"metadata": 1, "request": 22, "resource": 2, "warcinfo": 1}),
    "warc/malformed/example.warc.gz": ({"kept": 1, "revisit": 1}, {"request": 2, "warcinfo": 2}),
    # the cut-short response's Content-Length runs into the request record after it: the response is a
    # counted drop and reading resumes at the request's header (nothing after it is lost)
    "warc/malformed/example-trunc.warc": ({"error:bad_content_length": 1}, {"request": 1, "warcinfo": 2}),
    # FastWARC reads a single gzip stream to the end, so nothing is lost here
    "warc/malformed/example-bad-non-chunked.warc.gz": ({"kept": 1, "revisit": 1}, {"request": 2, "warcinfo": 2}),
    "warc/malformed/example-wrong-chunks.warc.gz": ({"kept": 1}, {"request": 1}),
}


def read_all(path, **cfg) -> tuple[pa.Table, pa.Table]:
    results = list(iter_documents(str(path), InputConfig(**cfg)))
    return concat(r.kept for r in results), concat(r.dropped for r in results)


def outcome(kept: pa.Table, dropped: pa.Table) -> dict:
    counts = Counter(dropped.column(DROP_REASON).to_pylist()) if dropped.num_rows else Counter()
    if kept.num_rows:
        counts["kept"] = kept.num_rows
    return dict(counts)


def gzipped_record(url: str, block: bytes, rtype: str = "response") -> bytes:
    """One gzip member holding a WARC/1.0 record (test input built from real pages)."""
    fields = {
        "WARC-Record-ID": record_id(url),
        "WARC-Date": "2024-05-18T01:58:10Z",
        "WARC-Target-URI": url,
        "Content-Type": f"application/http; msgtype={rtype}",
    }
    return gzip.compress(warc_record(rtype, fields, block, version="1.0"))


def http_response(body: bytes, *headers: str) -> bytes:
    return ("HTTP/1.1 200 OK\r\n" + "".join(h + "\r\n" for h in headers) + "\r\n").encode() + body


@pytest.fixture(scope="module")
def page(shared_data) -> bytes:
    return gzip.open(shared_data / "html/trafilatura-eval/pages/blog.python.org.html.gz").read()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_sample_record_is_kept_or_counted(shared_data, name):
    stats = StageStats(READ_STAGE)
    results = list(iter_documents(str(shared_data / name), InputConfig(batch_size=7), stats))
    kept, dropped = concat(r.kept for r in results), concat(r.dropped for r in results)
    documents, skipped = EXPECTED[name]
    assert outcome(kept, dropped) == documents
    assert stats.records_skipped == skipped  # requests, warcinfo, metadata: counted apart, never dropped rows
    assert stats.docs_in == kept.num_rows + dropped.num_rows and stats.docs_dropped == dropped.num_rows
    assert not dropped.num_rows or set(dropped.column(DROP_STAGE).to_pylist()) == {READ_STAGE}
    if kept.num_rows:
        ids = kept.column("id").to_pylist()
        assert len(set(ids)) == len(ids) and all(i.startswith("urn:uuid:") for i in ids)
        assert all(d and d[:2] == "20" and d.endswith("Z") for d in kept.column("date").to_pylist())
        assert all(u.startswith("http") for u in kept.column("url").to_pylist())  # wget's <...> stripped
        wet = kept.column("html").null_count == kept.num_rows
        for text, html in zip(kept.column("text").to_pylist(), kept.column("html").to_pylist()):
            assert (text and not html) if wet else (html and b"<" in html[:200] and text is None)


def test_a_wet_record_reads_with_its_common_crawl_language(shared_data):
    kept, _ = read_all(shared_data / "warc/cc-main-2024-22-whirlwind/whirlwind.warc.wet.gz")
    row = kept.to_pylist()[0]
    assert row["cc_lang"] == "spa" and row["url"] == "https://an.wikipedia.org/wiki/Escopete"
    assert row["text"].startswith("Escopete") and row["content_type"] == "text/plain"


def test_batches_are_bounded(shared_data):
    batches = list(iter_documents(str(shared_data / "warc/wget/dolma-sample-0000.warc.gz"), InputConfig(batch_size=5)))
    assert max(b.kept.num_rows for b in batches) == 5 and sum(b.kept.num_rows for b in batches) == 22


def test_ids_are_the_same_at_any_batch_size(shared_data):
    path = shared_data / "warc/wget/dolma-sample-0000.warc.gz"
    batches = list(iter_documents(str(path), InputConfig(batch_size=5)))
    again, _ = read_all(path)
    assert concat(b.kept for b in batches).column("id").to_pylist() == again.column("id").to_pylist()


def test_the_charset_comes_from_http_or_the_pages_meta(shared_data):
    again, _ = read_all(shared_data / "warc/wget/dolma-sample-0000.warc.gz")
    assert again.column("charset").to_pylist().count("utf-8") == 22  # 21 from HTTP, 1 from <meta>


def bounded_batches(path, limit: int, payload: str, at_least: int) -> list[pa.Table]:
    """The kept batches of ``path`` read with ``batch_bytes=limit``, checked to end at the limit."""
    batches = [b.kept for b in iter_documents(str(path), InputConfig(batch_bytes=limit))]
    assert len(batches) >= at_least
    for batch in batches:
        held = [len(p) for p in batch.column(payload).to_pylist()]
        assert sum(held[:-1]) < limit  # only the document that crossed the limit goes past it
    return batches


def test_batches_end_at_their_payload_bytes_with_nothing_lost(shared_data):
    """Large pages fill a batch by bytes before its document count: a worker's memory stays bounded."""
    path = shared_data / "warc/wget/dolma-sample-0000.warc.gz"
    whole, _ = read_all(path)
    sizes = [len(h) for h in whole.column("html").to_pylist()]
    limit = sum(sizes) // 5
    batches = bounded_batches(path, limit, "html", 4)
    assert concat(batches).column("id").to_pylist() == whole.column("id").to_pylist()


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_text_batches_end_at_their_payload_bytes(tmp_path, fmt):
    """Text inputs too: a Parquet read batch of large texts is split where the kept bytes reach the bound."""
    texts = [f"document {i} " + "word " * (400 + 37 * i) for i in range(60)]
    path = tmp_path / f"docs.{fmt}"
    if fmt == "parquet":
        pq.write_table(pa.table({"text": texts, "id": [str(i) for i in range(60)]}), path)
    else:
        path.write_text("".join(json.dumps({"text": t, "id": str(i)}) + "\n" for i, t in enumerate(texts)))
    limit = sum(map(len, texts)) // 6
    batches = bounded_batches(path, limit, "text", 6)
    assert concat(batches).column("text").to_pylist() == texts


def test_compressed_cc_payload_with_stale_header_is_kept(shared_data):
    # Common Crawl decodes payloads but keeps "Content-Encoding: gzip": the bytes must pass through.
    kept, _ = read_all(shared_data / CC14)
    html = kept.filter(pa.array([u.startswith("http://0x20.be") for u in kept.column("url").to_pylist()]))
    assert html.column("html")[0].as_py().startswith(b"<!DOCTYPE html>")


@pytest.mark.parametrize(
    "name,cut,kept_before",
    [
        (CC14, 100_000, 1),
        ("warc/wget/dolma-sample-0000.warc.gz", 100_000, 13),
        ("warc/wget/IAH-urls-wget.warc.gz", 23_500, 2),
    ],
)
def test_a_file_cut_midway_loses_only_the_cut_record_as_one_error(shared_data, tmp_path, name, cut, kept_before):
    path = tmp_path / Path(name).name
    path.write_bytes((shared_data / name).read_bytes()[:cut])
    kept, dropped = read_all(path)
    reasons = Counter(dropped.column(DROP_REASON).to_pylist())
    assert kept.num_rows == kept_before
    assert sum(n for r, n in reasons.items() if r.startswith("error:")) == 1


DOLMA = "warc/wget/dolma-sample-0000.warc.gz"  # 22 pages, one gzip member per record


def damaged(shared_data, tmp_path, case: str) -> Path:
    """``case``: a damaged or unreadable copy of real input (a WARC of 22 pages, a JSONL.gz, a Parquet file)."""
    raw = (shared_data / DOLMA).read_bytes()
    plain = gzip.decompress(raw)
    whole = gzip.compress(plain, mtime=0)  # the whole file one gzip stream, as some tools write it

    def flipped(data: bytes, at: int) -> bytes:
        return data[:at] + b"\xff" * 40 + data[at + 40 :]

    response = plain.index(b"Content-Length:", plain.index(b"WARC-Type: response", 30_000))
    jsonl = (shared_data / "documents/dolma-cc_en_head-0091.jsonl.gz").read_bytes()
    parquet = pa.BufferOutputStream()
    pq.write_table(pa.table({"text": ["a document", "another one"]}), parquet)
    parquet = parquet.getvalue().to_pybytes()
    data = {
        "corrupt_gzip_stream.warc.gz": lambda: flipped(whole, len(whole) // 3),
        "corrupt_gzip_member.warc.gz": lambda: flipped(raw, len(raw) // 2),
        "first_member_corrupt.warc.gz": lambda: flipped(raw, 10),
        "truncated_gzip.warc.gz": lambda: whole[: len(whole) // 2],
        "truncated.warc": lambda: plain[: len(plain) // 2],
        "cut_in_header.warc": lambda: plain[: response + 17],  # "Content-Length: 5", then nothing
        "cut_before_length.warc": lambda: plain[:response],
        "no_content_length.warc": lambda: plain[:response] + plain[plain.index(b"\r\n", response) + 2 :],
        "not_a_warc.warc": lambda: b"<html>a saved page, not a WARC file</html>\n" * 50,
        "plain_named_gz.warc.gz": lambda: plain,
        "empty.warc.gz": lambda: b"",
        "empty_gzip.warc.gz": lambda: gzip.compress(b""),
        "truncated.jsonl.gz": lambda: jsonl[: len(jsonl) // 2],
        "gzip_named_plain.jsonl": lambda: jsonl,
        "plain_named_gz.jsonl.gz": lambda: gzip.decompress(jsonl),
        "corrupt.parquet": lambda: flipped(parquet, 4),
        "truncated.parquet": lambda: parquet[:-30],
        "unknown_format.bin": lambda: b"\x00\x01 nothing we know",
    }
    path = tmp_path / case
    if case == "dangling_link.warc.gz":  # unreadable even for root, unlike chmod 000
        path.symlink_to(tmp_path / "gone.warc.gz")
    elif case == "link_loop.warc.gz":
        path.symlink_to(path)
    else:
        path.write_bytes(data[case]())
    return path


# Per damaged file: kept documents and dropped rows by reason (empty files: no row, a counter).
BAD_INPUTS = {
    "corrupt_gzip_stream.warc.gz": {"kept": 8, "error:corrupt_gzip": 1},  # nothing after the damage decompresses
    "corrupt_gzip_member.warc.gz": {"kept": 21, "error:corrupt_gzip": 1},  # reading resumes at the next member
    "first_member_corrupt.warc.gz": {"error:corrupt_gzip": 1},
    "truncated_gzip.warc.gz": {"kept": 14, "error:truncated": 1},
    "truncated.warc": {"kept": 14, "error:truncated": 1},
    "cut_in_header.warc": {"kept": 1, "error:truncated": 1},
    "cut_before_length.warc": {"kept": 1, "error:truncated": 1},
    "no_content_length.warc": {"kept": 21, "error:malformed_record": 1},  # reading resumes at the next record
    "not_a_warc.warc": {"error:not_warc": 1},
    "plain_named_gz.warc.gz": {"kept": 22},
    "empty.warc.gz": {},
    "empty_gzip.warc.gz": {},
    "dangling_link.warc.gz": {"error:unreadable": 1},
    "link_loop.warc.gz": {"error:unreadable": 1},
    "truncated.jsonl.gz": {"kept": 3, "error:truncated": 1},
    "gzip_named_plain.jsonl": {"kept": 10},
    "plain_named_gz.jsonl.gz": {"kept": 10},
    "corrupt.parquet": {"error:corrupt_parquet": 1},
    "truncated.parquet": {"error:corrupt_parquet": 1},
    "unknown_format.bin": {"error:unknown_format": 1},
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_files_are_counted_drops_naming_the_file(shared_data, tmp_path, case):
    """Damaged, misnamed, empty or unreadable files never raise: each damage is one counted drop whose
    message names the file, and the records before it (or, past a broken gzip member, after it) are kept."""
    path = damaged(shared_data, tmp_path, case)
    stats = StageStats(READ_STAGE)
    results = list(iter_documents(str(path), InputConfig(), stats))
    kept = concat(r.kept for r in results) if results else pa.table({})
    dropped = concat(r.dropped for r in results) if results else pa.table({})
    assert outcome(kept, dropped) == BAD_INPUTS[case]
    assert stats.counters["empty_files"] == (1 if case.startswith("empty") else 0)
    if stats.errors:
        assert stats.errors_seen.messages and all(str(path) in m for m in stats.errors_seen.messages)


def test_missing_file_is_unreadable(tmp_path):
    """A file gone between listing and reading (or a missing object of a Common Crawl listing)."""
    stats = StageStats(READ_STAGE)
    list(iter_documents(str(tmp_path / "nope.warc.gz"), InputConfig(), stats))
    assert dict(stats.dropped) == {"error:unreadable": 1}
    assert any("nope.warc.gz" in m for m in stats.errors_seen.messages)


def test_random_bytes_are_not_a_warc(tmp_path):
    random_bytes = tmp_path / "random.warc"
    random_bytes.write_bytes(bytes(range(256)) * 50)
    assert outcome(*read_all(random_bytes)) == {"error:not_warc": 1}


@pytest.fixture
def encoded_warc(tmp_path, page):
    """The page in chunked, gzip and chunked gzip payloads, a bad gzip, no type, JSON and a plain one."""
    chunked = (
        b"".join(b"%x\r\n%s\r\n" % (len(page[i : i + 4000]), page[i : i + 4000]) for i in range(0, len(page), 4000))
        + b"0\r\n\r\n"
    )
    records = [
        gzipped_record(
            "http://a/chunked", http_response(chunked, "Content-Type: text/html", "Transfer-Encoding: chunked")
        ),
        gzipped_record(
            "http://a/gzip",
            http_response(gzip.compress(page), "Content-Type: text/html; charset=UTF-8", "Content-Encoding: gzip"),
        ),
        gzipped_record(
            "http://a/both",
            http_response(
                b"%x\r\n%s\r\n0\r\n\r\n" % (len(gzip.compress(page)), gzip.compress(page)),
                "Content-Type: text/html",
                "Transfer-Encoding: chunked",
                "Content-Encoding: gzip",
            ),
        ),
        gzipped_record(
            "http://a/badgzip",
            http_response(b"\x1f\x8b\x08\x00garbage" * 10, "Content-Type: text/html", "Content-Encoding: gzip"),
        ),
        gzipped_record("http://a/notype", http_response(page)),  # sniffed as HTML
        gzipped_record("http://a/json", http_response(b'{"a": 1}', "Content-Type: application/json")),
        gzipped_record("http://a/big", http_response(page, "Content-Type: text/html")),
    ]
    path = tmp_path / "encoded.warc.gz"
    path.write_bytes(b"".join(records))
    return path


def test_chunked_and_gzip_payloads_are_decoded(encoded_warc, page):
    kept, dropped = read_all(encoded_warc, max_document_bytes=len(page) + 1000)
    by_url = dict(zip(kept.column("url").to_pylist(), kept.column("html").to_pylist()))
    assert by_url == {
        u: page for u in ("http://a/chunked", "http://a/gzip", "http://a/both", "http://a/notype", "http://a/big")
    }
    assert dict(zip(dropped.column("url").to_pylist(), dropped.column(DROP_REASON).to_pylist())) == {
        "http://a/badgzip": "error:content_encoding",
        "http://a/json": "non_html",
    }


def test_a_payload_over_max_document_bytes_is_dropped_as_too_large(encoded_warc, page):
    kept, dropped = read_all(encoded_warc, max_document_bytes=len(page) // 2)
    assert kept.num_rows == 0 and set(dropped.column(DROP_REASON).to_pylist()) == {
        "too_large",
        "non_html",
        "error:content_encoding",
    }


def test_payload_decoding_edge_cases():
    assert dechunk(b"<html>not chunked</html>") == b"<html>not chunked</html>"
    assert dechunk(b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n") == b"hello world"
    assert dechunk(b"5\r\nhello\r\nzz broken") == b"hellozz broken"  # keeps what framing allowed
    bomb = gzip.compress(b"<p>" + b"a" * 10_000_000)
    assert decode_payload(bomb, None, "gzip", 1_000_000) == (b"", "too_large")


def test_crawler_truncated_gzip_payload_keeps_its_start(page):
    partial, reason = decode_payload(gzip.compress(page)[:2000], None, "gzip", 10**6)
    assert reason is None and 1000 < len(partial) < len(page) and page.startswith(partial)


def test_jsonl_documents(shared_data):
    for name in (
        "dolma-cc_en_head-0091.jsonl.gz",
        "dolma-cc-2023-06-documents-000.json.gz",
        "redpajama-c4-refined.jsonl",
    ):
        kept, dropped = read_all(shared_data / "documents" / name, batch_size=3)
        assert kept.num_rows == 10 and dropped.num_rows == 0
        assert len(set(kept.column("id").to_pylist())) == 10
        assert all(len(t) > 100 for t in kept.column("text").to_pylist())
    kept, _ = read_all(shared_data / "documents/dolma-cc_en_head-0091.jsonl.gz")
    assert kept.column("id")[0].as_py().startswith("http") and kept.column("date")[0].as_py().startswith("2020-")
    again, _ = read_all(shared_data / "documents/redpajama-c4-refined.jsonl")  # no id field: hashed, stable
    first, _ = read_all(shared_data / "documents/redpajama-c4-refined.jsonl")
    assert first.column("id").to_pylist() == again.column("id").to_pylist()


def test_jsonl_bad_lines_are_counted(tmp_path):
    lines = [
        b'{"id": "a", "text": "fine document"}',
        b"{not json",
        b"[1, 2]",
        b'{"id": "b", "body": "wrong field"}',
        b'{"id": "c", "text": "   "}',
        b'{"id": "d", "text": "lone surrogate \\ud800 here"}',
        b'{"id": "e", "text": "invalid utf-8 \xff\xfe here"}',
        b"",
        b'{"id": "f", "text": "' + b"x" * 5000 + b'"}',
    ]
    path = tmp_path / "docs.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    kept, dropped = read_all(path, max_document_bytes=1000)
    assert kept.column("id").to_pylist() == ["a", "d", "e"]
    assert "\ufffd" in kept.column("text")[1].as_py() and "\ufffd" in kept.column("text")[2].as_py()
    assert Counter(dropped.column(DROP_REASON).to_pylist()) == {
        "error:malformed_record": 2,
        "missing_field:text": 1,
        "empty": 1,
        "too_large": 1,
    }
    kept, _ = read_all(path, text_field="body", max_document_bytes=1000)
    assert kept.column("text").to_pylist() == ["wrong field"]


def test_truncated_jsonl_gz_keeps_lines_before(shared_data, tmp_path):
    data = (shared_data / "documents/dolma-cc_en_head-0091.jsonl.gz").read_bytes()
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    kept, dropped = read_all(path)
    assert 1 <= kept.num_rows < 10
    assert dropped.column(DROP_REASON).to_pylist() == ["error:truncated"]


def test_parquet_documents(shared_data, tmp_path):
    docs = [json.loads(line) for line in gzip.open(shared_data / "documents/dolma-cc_en_head-0174.jsonl.gz")]
    path = tmp_path / "docs.parquet"
    pq.write_table(
        pa.table({"doc_id": [d["id"] for d in docs], "content": [d["text"] for d in docs]}), path, row_group_size=4
    )
    kept, dropped = read_all(path, text_field="content", id_field="doc_id", batch_size=3)
    assert kept.column("id").to_pylist() == [d["id"] for d in docs] and dropped.num_rows == 0
    assert kept.column("text").to_pylist() == [d["text"] for d in docs]
    with pytest.raises(ValueError, match="no column 'text'"):
        read_all(path)


def test_format_is_detected_from_the_name_or_else_the_content(shared_data, tmp_path):
    assert detect_format("x.warc.wet.gz") == "warc" and detect_format("x.json.gz") == "jsonl"
    assert detect_format("x.parquet") == "parquet" and detect_format("x.jsonl", "wet") == "warc"
    no_ext = tmp_path / "segment-00001"
    no_ext.write_bytes((shared_data / "warc/cc-main-2024-22-whirlwind/whirlwind.warc.gz").read_bytes())
    assert detect_format(str(no_ext)) == "warc" and read_all(no_ext)[0].num_rows == 1


def test_an_fsspec_url_is_read_as_its_own_source(shared_data):
    with fsspec.open("memory://bucket/sample.warc.gz", "wb") as fh:
        fh.write((shared_data / "warc/wget/dolma-sample-0000.warc.gz").read_bytes())
    kept, _ = read_all("memory://bucket/sample.warc.gz")
    assert kept.num_rows == 22 and set(kept.column("source").to_pylist()) == {"memory://bucket/sample.warc.gz"}


# -- bad input files in a run ----------------------------------------------------------------------

BAD_AMONG_GOOD = [
    "first_member_corrupt.warc.gz",
    "not_a_warc.warc",
    "empty.warc.gz",
    "dangling_link.warc.gz",
    "unknown_format.bin",
]


def test_bad_files_among_good_cost_one_counted_drop_each(spark, shared_data, tmp_path, capfd):
    """One good WARC beside damaged, empty and unreadable files: the run succeeds, every page of the good
    file is read, each bad file is one counted drop by reason, and no traceback is printed."""
    (tmp_path / "bad").mkdir()
    bad = [damaged(shared_data, tmp_path / "bad", case) for case in BAD_AMONG_GOOD]
    config = load_config(
        {
            "input": {"paths": [str(shared_data / DOLMA), str(tmp_path / "bad")]},  # a folder lists the dangling link
            "output": {"dir": str(tmp_path / "out")},
            "stages": [{"stage": "extract"}],
        }
    )
    result = run_pipeline(config, spark=spark)
    read = next(s for s in result.stats if s.stage == READ_STAGE)
    assert read.docs_kept == 22 and read.counters["empty_files"] == 1
    assert dict(read.dropped) == {
        "error:corrupt_gzip": 1,
        "error:not_warc": 1,
        "error:unreadable": 1,
        "error:unknown_format": 1,
    }
    assert sorted(m.split(": ")[1] for m in read.errors_seen.messages) == sorted(
        str(p) for p in bad if "empty" not in p.name
    )
    good_ids = set(read_all(shared_data / DOLMA)[0].column("id").to_pylist())
    corpus = pq.read_table(result.corpus_dir)
    assert set(corpus.column("id").to_pylist()) <= good_ids and corpus.num_rows >= 20
    assert "Traceback" not in "".join(capfd.readouterr())


def test_only_bad_files_exit_1_with_one_line(shared_data, tmp_path):
    """``dataprep run`` over files none of which holds a readable record: exit 1 and one line saying
    how many files and why, not an empty corpus with exit 0."""
    (tmp_path / "bad").mkdir()
    for case in ("first_member_corrupt.warc.gz", "empty.warc.gz", "dangling_link.warc.gz"):
        damaged(shared_data, tmp_path / "bad", case)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    cmd = [
        sys.executable,
        "-m",
        "pipelines.cli",
        "run",
        "ingest",
        "--input",
        str(tmp_path / "bad"),
        "--output",
        str(tmp_path / "out"),
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    [line] = [line for line in proc.stderr.splitlines() if line.startswith("dataprep run:")]
    assert line.startswith("dataprep run: no readable input in 3 files: ")
    assert all(f"1 {reason}" in line for reason in ("corrupt_gzip", "empty", "unreadable"))
    assert not (tmp_path / "out" / "corpus").exists()
