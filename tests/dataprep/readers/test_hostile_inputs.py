"""Input built to hurt the readers: links out of the input folder, archives with absolute or enormous
members, file names that are not UTF-8, StackExchange numbers past SQLite's integers. Each is a counted
drop or a kept row, never a file read from outside the input, never a hang or a crash."""

from __future__ import annotations

import io
import os
import tarfile
import zipfile
from collections import Counter

import pyarrow as pa
import pytest

from archives import tar_bytes
from dataprep.core.config import InputConfig
from dataprep.core.inputs import expand_inputs, read_jsonl_records
from dataprep.core.stage import DROP_REASON, concat
from dataprep.core.stats import StageStats
from dataprep.readers import expand_code_inputs, iter_documents

SECRET = "root:x:0:0:SECRET-HASH:/root:/bin/bash"
NOT_UTF8 = os.fsdecode(b"caf\xe9.py")  # a Latin-1 name, as Python lists it (surrogate escapes)


def read(path, **cfg) -> tuple[pa.Table, pa.Table, StageStats]:
    stats = StageStats("read")
    results = list(iter_documents(str(path), InputConfig(**cfg), stats))
    return concat(r.kept for r in results), concat(r.dropped for r in results), stats


def reasons(dropped: pa.Table) -> Counter:
    return Counter(dropped.column(DROP_REASON).to_pylist()) if dropped.num_rows else Counter()


def secret_files(tmp_path):
    """A folder outside the input holding what no reader may read: a password file and a folder of them."""
    outside = tmp_path / "outside"
    (outside / "keys").mkdir(parents=True)
    (outside / "passwd").write_text(SECRET + "\n")
    (outside / "keys" / "id.py").write_text(f"KEY = {SECRET!r}\n")
    (outside / "docs.jsonl").write_text(f'{{"id": "s", "text": "{SECRET}"}}\n')
    return outside


def test_code_folder_links_out_of_the_tree_are_counted_drops_naming_the_link(tmp_path):
    outside = secret_files(tmp_path)
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "main.py").write_text("print('hello')\n")
    (repo / "passwd.py").symlink_to(outside / "passwd")
    (repo / "keys").symlink_to(outside / "keys")  # a folder outside
    (repo / "alias.py").symlink_to(repo / "src" / "main.py")  # a file inside: read
    (repo / "again").symlink_to(repo / "src")  # a folder inside: not walked twice
    kept, dropped, stats = read(repo, format="code")
    assert sorted(kept.column("path").to_pylist()) == ["alias.py", "src/main.py"]
    assert not any(SECRET in text for text in kept.column("text").to_pylist())
    assert reasons(dropped) == {"link_outside_input": 2, "link_to_folder": 1}
    assert sorted(dropped.column("path").to_pylist()) == ["again", "keys", "passwd.py"]
    messages = " ".join(stats.errors_seen.messages)
    assert f"{repo / 'passwd.py'}: a link to {outside / 'passwd'}" in messages


def test_links_in_input_folders_of_documents_are_not_followed_out(tmp_path):
    outside = secret_files(tmp_path)
    folder = tmp_path / "crawl"
    folder.mkdir()
    (folder / "good.jsonl").write_text('{"id": "a", "text": "a document"}\n')
    (folder / "stolen.jsonl").symlink_to(outside / "docs.jsonl")
    (folder / "more").symlink_to(outside)
    files = expand_inputs([str(folder)])
    assert sorted(os.path.basename(f) for f in files) == ["good.jsonl", "more", "stolen.jsonl"]
    dropped_reasons, texts = Counter(), []
    for path in files:
        kept, dropped, _ = read(path, paths=[str(folder)])
        texts += kept.column("text").to_pylist()
        dropped_reasons += reasons(dropped)
    assert texts == ["a document"]
    assert dropped_reasons == {"link_outside_input": 2}
    # a glob's folder is the input folder too; a link named as the input itself is the user's choice
    kept, dropped, _ = read(folder / "stolen.jsonl", paths=[str(folder / "*.jsonl")])
    assert kept.num_rows == 0 and reasons(dropped) == {"link_outside_input": 1}
    kept, _, _ = read(folder / "stolen.jsonl", paths=[str(folder / "stolen.jsonl")])
    assert kept.column("text").to_pylist() == [SECRET]
    # reference texts, classifier examples and benchmarks read from a folder leave such links out too
    assert [record["text"] for record, _, _ in read_jsonl_records([str(folder)])] == ["a document"]


def test_inputs_whose_names_hold_glob_characters_are_read_as_named(tmp_path):
    literal = tmp_path / "crawl [2024]*?.jsonl"
    literal.write_text('{"id": "a", "text": "a document"}\n')
    assert expand_inputs([str(literal)]) == [str(literal)]
    repo = tmp_path / "repo[1]"
    repo.mkdir()
    (repo / "a.py").write_text("x = 1\n")
    assert expand_code_inputs([str(repo)]) == [str(repo)]
    assert expand_inputs([str(tmp_path / "*.jsonl")]) == [str(literal)]  # globs still match


@pytest.mark.timeout(60)  # they looped for ever
def test_archive_members_with_absolute_paths_are_read(tmp_path):
    files = {"/x.py": b"print('absolute')\n", "/etc/tool/y.py": b"y = 2\n", "./z.py": b"z = 3\n"}
    (tmp_path / "abs.tar.gz").write_bytes(tar_bytes(files))
    with zipfile.ZipFile(tmp_path / "abs.zip", "w") as archive:
        for name, data in files.items():
            archive.writestr(zipfile.ZipInfo(name), data)  # ZipInfo keeps the leading slash
    for name in ("abs.tar.gz", "abs.zip"):
        kept, dropped, _ = read(tmp_path / name, format="code")
        assert sorted(kept.column("path").to_pylist()) == ["tool/y.py", "x.py", "z.py"], name
        assert dropped.num_rows == 0


def zeros_tar(path, size: int) -> None:
    """A tar.gz holding one member of ``size`` zero bytes, written without holding it, then a small file."""
    with tarfile.open(path, "w:gz", compresslevel=1) as archive:
        info = tarfile.TarInfo("repo/zeros.py")
        info.size = size
        archive.addfile(info, _Zeros(size))
        info = tarfile.TarInfo("repo/after.py")
        info.size = 6
        archive.addfile(info, io.BytesIO(b"a = 1\n"))


class _Zeros(io.RawIOBase):
    def __init__(self, size: int) -> None:
        self.left = size

    def readinto(self, buffer) -> int:
        n = min(len(buffer), self.left)
        buffer[:n] = bytes(n)
        self.left -= n
        return n

    def readable(self) -> bool:
        return True


def test_an_enormous_archive_member_is_too_large_without_being_read(tmp_path):
    zeros_tar(tmp_path / "bomb.tar.gz", 64 << 20)
    with zipfile.ZipFile(tmp_path / "bomb.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("repo/zeros.py", "w", force_zip64=True) as fh:
            for _ in range(64):
                fh.write(bytes(1 << 20))
        archive.writestr("repo/after.py", b"a = 1\n")
    for name in ("bomb.tar.gz", "bomb.zip"):
        kept, dropped, stats = read(tmp_path / name, format="code", max_document_bytes=1 << 20)
        assert kept.column("path").to_pylist() == ["after.py"], name
        assert reasons(dropped) == {"too_large": 1} and dropped.column("size").to_pylist() == [64 << 20]
        assert stats.bytes_in == 6, name  # the member was never read


def test_arxiv_members_are_bounded_before_they_are_read(tmp_path):
    zeros_tar(tmp_path / "2401.00001.tar.gz", 16 << 20)
    kept, dropped, stats = read(tmp_path / "2401.00001.tar.gz", max_document_bytes=1 << 20)
    assert reasons(dropped) == {"too_large": 1} and stats.bytes_in == 6
    bomb = io.BytesIO()
    with tarfile.open(fileobj=bomb, mode="w:gz") as inner:  # a paper whose gzip expands past the limit
        info = tarfile.TarInfo("main.tex")
        info.size = 16 << 20
        inner.addfile(info, _Zeros(16 << 20))
    (tmp_path / "arXiv_src_2401_001.tar").write_bytes(tar_bytes({"2401/2401.00002.gz": bomb.getvalue()}, mode="w"))
    kept, dropped, _ = read(tmp_path / "arXiv_src_2401_001.tar", max_document_bytes=1 << 20)
    assert kept.num_rows == 0 and reasons(dropped) == {"too_large": 1}


def test_file_names_that_are_not_utf8_are_kept_with_a_decoded_path(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / NOT_UTF8).write_text("x = 1\n")
    (repo / "ok.py").write_text("y = 2\n")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", encoding="utf-8", errors="surrogateescape") as archive:
        for name, data in ((f"repo/{NOT_UTF8}", b"x = 1\n"), ("repo/ok.py", b"y = 2\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    (tmp_path / "repo.tar.gz").write_bytes(buf.getvalue())
    for path in (repo, tmp_path / "repo.tar.gz"):
        kept, dropped, stats = read(path, format="code")
        assert sorted(kept.column("path").to_pylist()) == ["caf\ufffd.py", "ok.py"], path
        assert dropped.num_rows == 0 and stats.counters["file_names_not_utf8"] == 1
    (tmp_path / NOT_UTF8.replace(".py", ".jsonl")).write_text('{"text": "a document"}\n')
    kept, _, _ = read(tmp_path / NOT_UTF8.replace(".py", ".jsonl"))
    assert kept.column("source").to_pylist() == [f"{tmp_path}/caf\ufffd.jsonl"]


def test_stackexchange_numbers_past_sqlite_integers(tmp_path):
    site = tmp_path / "cooking.stackexchange.com"
    site.mkdir()
    rows = [
        '<row Id="1" PostTypeId="1" Title="Salt?" Body="&lt;p&gt;How much salt?&lt;/p&gt;" />',
        '<row Id="2" PostTypeId="2" ParentId="1" Score="99999999999999999999999" Body="&lt;p&gt;A pinch.&lt;/p&gt;" />',
        '<row Id="3" PostTypeId="2" ParentId="1" Score="-99999999999999999999999" Body="&lt;p&gt;A '
        'bucket.&lt;/p&gt;" />',
        '<row Id="4" PostTypeId="2" ParentId="1" Score="many" Body="&lt;p&gt;Some.&lt;/p&gt;" />',
        '<row Id="99999999999999999999999" PostTypeId="1" Title="Big" Body="&lt;p&gt;id&lt;/p&gt;" />',
    ]
    (site / "Posts.xml").write_text('<?xml version="1.0"?>\n<posts>\n' + "\n".join(rows) + "\n</posts>\n")
    kept, dropped, _ = read(site / "Posts.xml", format="stackexchange")
    (text,) = kept.column("text").to_pylist()
    assert text.index("A pinch.") < text.index("Some.") < text.index("A bucket.")  # by score, clamped
    assert reasons(dropped) == {"error:malformed_record": 1}


@pytest.mark.parametrize("fmt", ["stackexchange", "wikipedia"])
def test_a_dump_line_that_never_ends_is_not_held(tmp_path, fmt):
    """A bz2 dump whose one line expands to 32 MB (no line break): dropped as too large, the memory held
    bounded by the document limit, the rows after it kept."""
    import bz2
    import tracemalloc

    endless = b"a" * (32 << 20)
    if fmt == "stackexchange":
        body = (
            b'<posts>\n<row Id="1" PostTypeId="1" Title="Big" Body="' + endless + b'" />\n'
            b'<row Id="2" PostTypeId="1" Title="Salt?" Body="How much salt?" />\n</posts>\n'
        )
        path = tmp_path / "cooking.stackexchange.com" / "Posts.xml.bz2"
    else:
        page = "<page>\n<title>{0}</title>\n<ns>0</ns>\n<id>{1}</id>\n<revision><text>{2}</text></revision>\n</page>\n"
        body = (
            b"<mediawiki>\n"
            + page.format("Big", 1, "x").encode().replace(b">x<", b">" + endless + b"<")
            + page.format("Salt", 2, "Salt is a mineral. " * 20).encode()
            + b"</mediawiki>\n"
        )
        path = tmp_path / "enwiki-pages-articles.xml.bz2"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(bz2.compress(body))
    warm = tmp_path / "warm" / path.name
    warm.parent.mkdir()
    warm.write_bytes(bz2.compress(body.replace(endless, b"short")))
    read(warm, format=fmt)  # the reader's imports and caches, before measuring
    tracemalloc.start()
    try:
        kept, dropped, _ = read(path, format=fmt, max_document_bytes=1 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert kept.num_rows == 1 and reasons(dropped) == {"too_large": 1}
    assert peak < 12 << 20, peak
