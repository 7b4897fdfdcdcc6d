"""Code as a source: every file a row with its repository, path, language, licence and size, read the same
from a folder, a tar or a zip; binary files, undecodable bytes and broken archives counted; The Stack-style
records; the licence and language policy stages; MinHash's code shingles."""

from __future__ import annotations

import json
import sysconfig
import zipfile
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from archives import tar_bytes
from code_tree import EXPECTED_DROPPED, EXPECTED_KEPT, GPL3, MIT, TREE, write_tree
from dataprep.code.languages import LANGUAGES, language
from dataprep.code.licenses import CodeLicense, license_of_metadata, license_of_text
from dataprep.core.config import ConfigError, InputConfig, load_config
from dataprep.core.stage import DROP_REASON, concat
from dataprep.core.stats import StageStats
from dataprep.dedup.minhash import MinHashDedup, jaccard
from dataprep.readers import expand_code_inputs, iter_documents


def read(path, **cfg) -> tuple[pa.Table, pa.Table, StageStats]:
    stats = StageStats("read")
    results = list(iter_documents(str(path), InputConfig(format="code", **cfg), stats))
    return concat(r.kept for r in results), concat(r.dropped for r in results), stats


def kept_rows(kept: pa.Table) -> set[tuple]:
    return {(r["repo"], r["path"], r["language"], r["license"]) for r in kept.to_pylist()}


def reasons(dropped: pa.Table) -> Counter:
    return Counter(dropped.column(DROP_REASON).to_pylist()) if dropped.num_rows else Counter()


def test_language_table_covers_the_common_languages():
    assert len(set(LANGUAGES.values())) >= 30
    assert [language(p) for p in ("a.py", "a.h", "a.hpp", "a.tsx", "Makefile", "a.ipynb", "a.go")] == [
        "Python",
        "C",
        "C++",
        "TypeScript",
        "Makefile",
        "Jupyter Notebook",
        "Go",
    ]
    assert language("README") is None and language("notes.txt") is None


def test_a_shebang_names_the_language():
    assert language("tool", b"#!/usr/bin/env bash\n") == "Shell"


def test_licence_of_a_licence_file():
    assert license_of_text(MIT) == "MIT"  # identify's whole-text match
    assert license_of_text(GPL3) == "GPL-3.0"  # by its title
    stdlib_license = Path(sysconfig.get_paths()["stdlib"]) / "LICENSE.txt"  # history first, then several licences
    assert license_of_text(stdlib_license.read_text(encoding="utf-8")) == "PSF-2.0"
    assert license_of_text("Do what you like, but ask me first.") is None


def test_licence_of_package_metadata_from_its_fields_files_or_classifiers():
    assert license_of_metadata("Name: a\nLicense-Expression: MIT OR Apache-2.0\nLicense: GPL\n") == "MIT OR Apache-2.0"
    assert license_of_metadata("Name: a\nLicense: BSD\n", [MIT]) == "MIT"  # licence files before the free-text field
    assert license_of_metadata("Name: a\nLicense: Apache 2.0\n") == "Apache-2.0"
    assert license_of_metadata("Name: a\nClassifier: License :: OSI Approved :: MIT License\n") == "MIT"
    assert license_of_metadata("Name: a\nLicense: see the website\n") is None


def test_a_tree_of_repositories_every_file_a_row(tmp_path):
    root = write_tree(tmp_path / "repos")
    kept, dropped, stats = read(root)
    assert kept_rows(kept) == EXPECTED_KEPT
    assert reasons(dropped) == EXPECTED_DROPPED  # nothing lost: 7 kept + 4 dropped = the 11 files outside .git
    assert stats.counters == {"records_skipped:git_folder": 1}
    assert set(kept.column("source_kind").to_pylist()) == {"code"}
    row = next(r for r in kept.to_pylist() if r["path"] == "src/app.py")
    assert row["size"] == len(TREE["tool/src/app.py"]) and row["text"] == TREE["tool/src/app.py"].decode()
    # a folder inside a repository finds the repository's root and licence above it
    kept_inner, _, _ = read(root / "tool" / "src")
    assert ("tool", "src/app.py", "Python", "MIT") in kept_rows(kept_inner)
    assert kept_rows(read(root / "tool" / "src" / "app.py")[0]) == {("tool", "src/app.py", "Python", "MIT")}  # one file


def test_vendored_copies_stay_in_their_repository_where_the_vendored_rule_sees_them(tmp_path):
    """pip's ``_vendor/requests`` carries its own licence, but it is pip's copy, not a repository of its own."""
    from dataprep.code.rules import path_reason

    root = write_tree(
        tmp_path / "tool",
        {
            "LICENSE": MIT.encode(),
            "tool/main.py": b"print(1)\n",
            "tool/_vendor/lib/LICENSE": GPL3.encode(),
            "tool/_vendor/lib/core.py": b"x = 1\n",
            "plugins/extra/LICENSE": GPL3.encode(),
            "plugins/extra/plugin.py": b"y = 2\n",
        },
    )
    rows = {(r["repo"], r["path"], r["license"]) for r in read(root)[0].to_pylist() if r["path"].endswith(".py")}
    assert rows == {
        ("tool", "tool/main.py", "MIT"),
        ("tool", "tool/_vendor/lib/core.py", "MIT"),
        ("extra", "plugin.py", "GPL-3.0"),
    }
    assert path_reason("tool/_vendor/lib/core.py") == "vendored"
    archive = tmp_path / "tool.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for file in sorted(p for p in root.rglob("*") if p.is_file()):
            zf.write(file, "tool/" + file.relative_to(root).as_posix())
    assert {
        (r["repo"], r["path"], r["license"]) for r in read(archive)[0].to_pylist() if r["path"].endswith(".py")
    } == rows


@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_an_archive_reads_as_the_folder_does(tmp_path, kind):
    files = {f"repos/{k}": v for k, v in TREE.items()}
    path = tmp_path / f"repos.{kind}"
    if kind == "zip":
        with zipfile.ZipFile(path, "w") as archive:
            for name, data in files.items():
                archive.writestr(name, data)
    else:
        path.write_bytes(tar_bytes(files))
    kept, dropped, _ = read(path)
    folder_kept, _, _ = read(write_tree(tmp_path / "repos"))
    assert kept_rows(kept) == EXPECTED_KEPT and reasons(dropped) == EXPECTED_DROPPED
    assert sorted(kept.column("id").to_pylist()) == sorted(folder_kept.column("id").to_pylist())


def test_broken_archives_keep_what_was_read(tmp_path):
    whole = tar_bytes({"r/LICENSE": MIT.encode(), "r/a.py": b"a = 1\n" * 2000, "r/b.py": b"b = 2\n" * 2000}, mode="w")
    cut = tmp_path / "cut.tar"
    cut.write_bytes(whole[: len(whole) - 7000])  # b.py cut short
    kept, dropped, _ = read(cut)
    assert sorted(kept.column("path").to_pylist()) == ["LICENSE", "a.py"]
    assert reasons(dropped) == {"error:truncated": 1}
    junk = tmp_path / "junk.zip"
    junk.write_bytes(b"not a zip at all")
    kept, dropped, _ = read(junk)
    assert kept.num_rows == 0 and reasons(dropped) == {"error:malformed_record": 1}


def test_an_installed_package_is_its_record_with_its_licence():
    site = Path(sysconfig.get_paths()["purelib"])
    dist = next(site.glob("pyyaml-*.dist-info"), None) or next(site.glob("PyYAML-*.dist-info"))
    assert expand_code_inputs([str(site)]).count(str(dist)) == 1  # site-packages: one input per package
    kept, dropped, _ = read(dist)
    paths = set(kept.column("path").to_pylist())
    assert "yaml/__init__.py" in paths and not any(".dist-info/" in p for p in paths)
    assert set(kept.column("license").to_pylist()) == {"MIT"} and set(kept.column("language").to_pylist()) == {"Python"}
    assert set(reasons(dropped)) <= {"binary", "empty"}  # the compiled extension


def test_stack_style_records(tmp_path):
    records = [
        {"content": "print('a')\n", "path": "a.py", "repo": "o/r", "license": "MIT"},
        {
            "content": "fn x() {}\n",
            "max_stars_repo_path": "src/x.rs",
            "max_stars_repo_name": "o/s",
            "max_stars_repo_licenses": ["Apache-2.0", "MIT"],
            "lang": "Rust",
            "hexsha": "abc",
        },
        {"path": "no_content.py", "repo": "o/r"},
    ]
    jsonl = tmp_path / "stack.jsonl"
    huge = {
        "content": "x = 1\n" * 40_000,
        "path": "huge.py",
        "repo": "o/r",
    }  # a line no document may be: never held whole
    jsonl.write_text("\n".join(json.dumps(r) for r in records + [huge]) + "\n{broken\n")
    kept, dropped, _ = read(jsonl, max_document_bytes=50_000)
    assert [
        (r["id"].startswith("code-"), r["repo"], r["path"], r["language"], r["license"]) for r in kept.to_pylist()
    ] == [(True, "o/r", "a.py", "Python", "MIT"), (False, "o/s", "src/x.rs", "Rust", "Apache-2.0 AND MIT")]
    assert reasons(dropped) == {"missing_field:content": 1, "error:malformed_record": 1, "too_large": 1}
    parquet = tmp_path / "stack.parquet"
    columns = sorted({k for r in records[:2] for k in r})
    pq.write_table(pa.Table.from_pylist([{k: r.get(k) for k in columns} for r in records[:2]]), parquet)
    assert kept_rows(read(parquet)[0]) == kept_rows(kept)


def test_licence_policy_stage():
    table = pa.table(
        {
            "id": list("abcdef"),
            "text": ["x"] * 6,
            "license": ["MIT", "GPL-3.0", "MIT OR GPL-3.0", "MIT AND GPL-3.0", "none", "CC-BY-4.0"],
        }
    )
    assert CodeLicense().apply(table).dropped.column(DROP_REASON).to_pylist() == [
        "license:GPL-3.0",
        "license:MIT AND GPL-3.0",
        "license:none",
    ]
    strict = CodeLicense(deny=["CC-BY-4.0"], keep_unlicensed=True).apply(table)
    assert strict.kept.column("id").to_pylist() == ["a", "c", "e"]
    web = pa.table({"id": ["w"], "text": ["a web page"]})
    assert CodeLicense().apply(web).kept.num_rows == 1  # not code: untouched


def test_language_stage_names_are_checked(tmp_path):
    with pytest.raises(ConfigError, match="did you mean 'Python'"):
        load_config(
            {
                "input": {"format": "code", "paths": ["x"]},
                "stages": [{"stage": "code_language", "languages": ["Pyhton"]}],
            }
        )
    config = load_config({"input": {"format": "code"}, "stages": [{"stage": "code_language", "languages": ["Rust"]}]})
    kept, _, _ = read(write_tree(tmp_path / "repos"))
    result = config.stages[0].apply(kept)
    assert set(result.kept.column("language").to_pylist()) == {"Rust"}
    assert Counter(result.dropped.column(DROP_REASON).to_pylist()) == {
        "no_language": 3,
        "language:Python": 2,
        "language:C": 1,
    }


def test_code_shingles_see_through_layout_not_through_renames():
    code = (
        "def total(items):\n    result = 0\n    for item in items:\n        result += item.price * "
        "item.count\n    return result\n"
    )
    relaid = code.replace("    ", "\t").replace(" * ", "*").replace(" += ", "+=")
    renamed = code.replace("result", "acc").replace("item", "row")
    stage = MinHashDedup(shingle="code")
    original, *others = stage.shingle_sets([code, relaid, renamed])
    assert [jaccard(original, other) for other in others] == [1.0, pytest.approx(0.0, abs=0.2)]
    table = pa.table({"id": ["a", "b", "c"], "text": [code, relaid, renamed]})
    assert stage.run_local(table).kept.column("id").to_pylist() == ["a", "c"]
