"""The ``code`` preset on Spark over real code with real licences: part of this Python's standard library and a
few installed packages (found where this interpreter keeps them; nothing copied into the repository), plus
planted damage. It keeps over a thousand files, each with its language and a licence the default policy
allows; every file read is a kept row or a counted drop; the corpus is the same when the standard library
comes as one archive instead of many folders; a rerun after a crash reuses the finished tasks."""

from __future__ import annotations

import json
import os
import sysconfig
import tarfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from archives import tar_bytes
from code_tree import TREE, write_tree
from dataprep.code.licenses import CodeLicense
from dataprep.core.config import load_config
from pipelines.pipeline_run import run_pipeline
from resume import rerun_after_a_crash

pytestmark = pytest.mark.slow  # many processes or subprocess CLIs: scripts/test.sh --fast leaves it out

STDLIB = Path(sysconfig.get_paths()["stdlib"])
SITE = Path(sysconfig.get_paths()["purelib"])
STDLIB_PACKAGES = [
    "json",
    "email",
    "http",
    "asyncio",
    "xml",
    "importlib",
    "unittest",
    "logging",
    "urllib",
    "concurrent",
    "multiprocessing",
    "encodings",
    "collections",
    "sqlite3",
    "wsgiref",
    "html",
    "dbm",
    "zoneinfo",
    "tomllib",
    "re",
    "curses",
    "venv",
    "ensurepip",
    "lib2to3",
    "idlelib",
    "ctypes",
    "distutils",
    "tkinter",
    "turtledemo",
    "test/test_asyncio",
    "test/test_email",
    "test/test_importlib",
]
INSTALLED = ["pip", "idna", "pyyaml"]
SKIPPED = {".git", "__pycache__"}


def installed(name: str) -> Path:
    return next(p for p in sorted(SITE.glob("*.dist-info")) if p.name.lower().startswith(f"{name}-"))


def files_in(folder: Path) -> int:
    return sum(len(files) for here, dirs, files in os.walk(folder) if not SKIPPED & set(Path(here).parts))


def package_files(dist: Path) -> int:
    listed = {line.split(",")[0] for line in (dist / "RECORD").read_text().splitlines() if line}
    return sum(
        1
        for p in listed
        if not p.startswith(("../", "/")) and not p.startswith(dist.name + "/") and "__pycache__" not in p
    )


def planted(root: Path) -> list[Path]:
    """A repository with binary, undecodable and empty files, a GPL one, a file no repository licenses, and
    an archive cut short after its first file."""
    write_tree(root / "planted", TREE | {"loose/notes.py": b"print('whose?')\n"})
    whole = tar_bytes(
        {"cut/LICENSE": TREE["tool/LICENSE"], "cut/first.py": b"a = 1\n" * 2000, "cut/second.py": b"b = 2\n" * 2000},
        mode="w",
    )
    (root / "cut.tar").write_bytes(whole[: len(whole) - 7000])
    return [root / "planted", root / "cut.tar"]


def code_config(out: Path, inputs: list[Path]):
    config = load_config("code", overrides={"input": {"paths": [str(p) for p in inputs]}, "output": {"dir": str(out)}})
    config.stages[-1].train.vocab_size = 2000  # a small tokenizer: the shards are not what is tested here
    return config


def corpus(result) -> list[tuple]:
    return sorted(
        (r["id"], r["repo"], r["path"], r["language"], r["license"], r["text"])
        for r in pq.read_table(result.corpus_dir).to_pylist()
    )


@pytest.fixture(scope="module")
def code_run(spark, tmp_path_factory):
    missing = [name for name in STDLIB_PACKAGES if not (STDLIB / name).is_dir()]
    if missing:  # Debian's system Python ships idlelib, tkinter and the test suite as separate packages
        pytest.skip(f"this Python's standard library lacks {', '.join(missing)}: too few files for a thousand")
    root = tmp_path_factory.mktemp("code")
    inputs = [STDLIB / name for name in STDLIB_PACKAGES] + [installed(name) for name in INSTALLED] + planted(root)
    config = code_config(root / "out", inputs)
    return root, inputs, config, run_pipeline(config, spark=spark)


def test_code_preset_keeps_a_thousand_licensed_files_counting_every_other(code_run):
    root, inputs, _, result = code_run
    stats = {s.stage: s for s in result.stats}
    rows = corpus(result)
    assert len(rows) >= 1000
    policy = CodeLicense()
    assert all(language and policy.allowed(license) for _, _, _, language, license, _ in rows)
    assert {"PSF-2.0", "MIT", "BSD-3-Clause"} <= {r[4] for r in rows}
    read = stats["read"]
    files = sum(files_in(p) for p in inputs[: len(STDLIB_PACKAGES)]) + sum(
        package_files(installed(n)) for n in INSTALLED
    )
    files += (
        len(TREE) - 1 + 1 + 3
    )  # planted: all but .git/HEAD, the loose file; the cut archive: its two whole files, the cut
    assert read.docs_in == files  # every file a row: kept or dropped with its reason
    assert read.dropped["undecodable"] >= 1 and read.dropped["error:truncated"] == 1 and read.dropped["binary"] >= 2
    assert stats["code_license"].dropped == {"license:GPL-3.0": 2, "license:none": 1}
    assert stats["code_language"].dropped["no_language"] >= 3
    assert stats["code_quality"].dropped["vendored"] > 0  # pip's _vendor
    assert stats["minhash_dedup"].dropped["minhash_duplicate"] > 0  # the generated codec tables in encodings/
    manifest = json.loads((Path(result.output_dir) / "shards" / "manifest.json").read_text())
    assert manifest["documents"] == len(rows)


def test_the_same_corpus_from_one_archive_of_the_standard_library(spark, code_run, tmp_path):
    root, inputs, _, result = code_run
    archive = tmp_path / "stdlib.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(STDLIB / "LICENSE.txt", arcname=f"{STDLIB.name}/LICENSE.txt")
        for name in STDLIB_PACKAGES:
            tar.add(
                STDLIB / name, arcname=f"{STDLIB.name}/{name}", filter=lambda m: None if "__pycache__" in m.name else m
            )
    one = run_pipeline(code_config(tmp_path / "out", [archive, *inputs[len(STDLIB_PACKAGES) :]]), spark=spark)
    assert corpus(one) == corpus(result)


def test_a_rerun_after_a_crash_reuses_the_finished_tasks(spark, code_run):
    _, _, config, result = code_run
    assert corpus(rerun_after_a_crash(config, spark)) == corpus(result)


def test_llama1_mixture_budgets_the_code_source(code_run, tmp_path, monkeypatch, capsys):
    """llama1 carries code at GitHub's 4.5%; ``pretrain budget --data llama1`` gives it its tokens and epochs
    (every source here stands in with the code run's shards)."""
    from pretrain.cli import main as pretrain_main
    from pretrain.mixture_presets import load_mixture

    _, _, _, result = code_run
    sources = {s["name"]: s for s in load_mixture("llama1")}
    assert sources["code"]["preset"] == "code" and sources["code"]["weight"] == 0.045
    for source in sources.values():
        (tmp_path / source["path"]).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / source["path"]).symlink_to(Path(result.output_dir) / "shards")
    monkeypatch.chdir(tmp_path)
    tokens = json.loads((Path(result.output_dir) / "shards" / "manifest.json").read_text())["tokens"]
    assert pretrain_main(["budget", "--data", "llama1", "--tokens", str(100 * tokens), "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["mixture"]}
    assert rows["code"]["tokens"] == pytest.approx(4.5 * tokens) and rows["code"]["epochs"] == pytest.approx(4.5)
