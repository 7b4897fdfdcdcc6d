"""An output folder belongs to one run: another config or input is refused before any work and leaves the
folder byte-for-byte as it was; the same run resumes; ``--overwrite`` replaces on purpose. Also where a
trained tokenizer goes (``<output>/tokenizer``) and what a sample too small for its vocabulary gives."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dataprep.core.config import load_config
from dataprep.report.build import build_report
from pipelines.pipeline_run import run_pipeline
from pipelines.run_folder import RUN_MARKER, OutputInUse

JSONL = "documents/redpajama-c4-refined.jsonl"
OTHER = "documents/redpajama-cc-2023-06-refined.jsonl"


def _config(out: Path, inputs: list[Path], stages=None):
    """The shipped ``ingest`` preset (what the command runs), or ``stages`` instead of its own."""
    overrides = {"input": {"paths": [str(p) for p in inputs]}, "output": {"dir": str(out)}}
    if stages is None:
        return load_config("ingest", overrides)
    return load_config({**overrides, "stages": stages})


def _snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _dataprep(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    code = "import sys; from pipelines.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def first_run(spark, shared_data, tmp_path_factory):
    """One finished run, written once and copied by each test that changes it."""
    out = tmp_path_factory.mktemp("first") / "out"
    result = run_pipeline(_config(out, [shared_data / JSONL]), spark=spark)
    build_report(str(out))  # `dataprep report`: its files join the run's record
    return out, _ids(result.corpus_dir)


def _ids(corpus: str) -> set[str]:
    return set(pq.read_table(corpus, columns=["id"]).column("id").to_pylist())


def _copy(first_run, tmp_path) -> Path:
    import shutil

    out = tmp_path / "out"
    shutil.copytree(first_run[0], out)
    return out


@pytest.mark.parametrize("change", ["another input", "another config"])
def test_another_run_into_a_used_folder_is_refused_leaving_it_byte_identical(first_run, shared_data, tmp_path, change):
    out = _copy(first_run, tmp_path)
    before = _snapshot(out)
    inputs = [shared_data / (OTHER if change == "another input" else JSONL)]
    args = ["run", "ingest", "--output", str(out), "--input", *map(str, inputs), "--json"]
    if change == "another config":
        args += ["--set", "stages.1.languages=[de]"]
    done = _dataprep(*args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "already holds the output of another run" in done.stderr and "--overwrite" in done.stderr
    assert json.loads(done.stdout)["exit_status"] == 2  # --json: one object on failure too
    assert _snapshot(out) == before


def test_the_same_run_resumes(spark, first_run, shared_data, tmp_path):
    out = _copy(first_run, tmp_path)
    again = run_pipeline(_config(out, [shared_data / JSONL]), spark=spark)
    assert again.skipped_steps == 1  # the same config and input: nothing redone


def test_overwrite_replaces_another_run(spark, first_run, shared_data, tmp_path):
    out = _copy(first_run, tmp_path)
    other = _config(out, [shared_data / OTHER], [{"stage": "langid"}, {"stage": "exact_dedup"}])
    with pytest.raises(OutputInUse):
        run_pipeline(other, spark=spark)
    replaced = run_pipeline(other, spark=spark, overwrite=True)
    fresh = run_pipeline(
        _config(tmp_path / "fresh", [shared_data / OTHER], [{"stage": "langid"}, {"stage": "exact_dedup"}]), spark=spark
    )
    assert _ids(replaced.corpus_dir) == _ids(fresh.corpus_dir) and not _ids(fresh.corpus_dir) & first_run[1]
    assert not (out / "report").exists()  # the old run's report no longer describes the folder
    assert sorted(p.name for p in (out / "steps").iterdir()) == sorted(
        p.name for p in (tmp_path / "fresh" / "steps").iterdir()
    )
    assert json.loads((out / "stats.json").read_text())["input_files"] == 1
    # and the replacement is now the folder's run: it resumes
    assert run_pipeline(other, spark=spark).skipped_steps == 2


def test_folders_a_run_cannot_use(spark, shared_data, tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder")
    done = _dataprep("run", "ingest", "--input", str(shared_data / JSONL), "--output", str(a_file), cwd=tmp_path)
    assert done.returncode == 2 and "is a file" in done.stderr and "Traceback" not in done.stderr

    other_files = tmp_path / "mine"
    other_files.mkdir()
    (other_files / "notes.txt").write_text("keep me")
    done = _dataprep("run", "ingest", "--input", str(shared_data / JSONL), "--output", str(other_files), cwd=tmp_path)
    assert (
        done.returncode == 2 and "not a pipeline output (notes.txt)" in done.stderr and "--overwrite" not in done.stderr
    )
    with pytest.raises(OutputInUse, match=r"\(notes\.txt\)"):  # --overwrite deletes none of them either
        run_pipeline(_config(other_files, [shared_data / JSONL]), spark=spark, overwrite=True)
    assert (other_files / "notes.txt").read_text() == "keep me" and not (other_files / RUN_MARKER).exists()


def test_overwrite_refuses_naming_files_no_run_wrote(spark, first_run, shared_data, tmp_path):
    out = _copy(first_run, tmp_path)
    (out / "report" / "q3_findings.md").write_text("my notes")
    (out / "tokenizer").mkdir()
    (out / "tokenizer" / "vocab.txt").write_text("my vocabulary")
    before = _snapshot(out)
    other = _config(out, [shared_data / OTHER], [{"stage": "langid"}])
    with pytest.raises(OutputInUse, match=r"report/q3_findings\.md, tokenizer/vocab\.txt.*move those files away"):
        run_pipeline(other, spark=spark, overwrite=True)
    assert _snapshot(out) == before  # nothing removed, not even what the run wrote


def test_overwrite_removes_what_runs_wrote(spark, first_run, shared_data, tmp_path):
    out = _copy(first_run, tmp_path)
    run_pipeline(_config(out, [shared_data / OTHER], [{"stage": "langid"}]), spark=spark, overwrite=True)
    assert not (out / "report").exists() and (out / "corpus" / "_STEP_DONE.json").exists()


def test_an_older_output_without_a_run_record_is_refused_even_with_overwrite(spark, first_run, shared_data, tmp_path):
    out = _copy(first_run, tmp_path)
    (out / RUN_MARKER).unlink()
    config = _config(out, [shared_data / JSONL])
    with pytest.raises(OutputInUse, match="no run record"):
        run_pipeline(config, spark=spark)
    before = _snapshot(out)
    with pytest.raises(OutputInUse, match=r"does not list as written by ccpretrain \(corpus/"):
        run_pipeline(config, spark=spark, overwrite=True)  # nothing says these files are a run's
    assert _snapshot(out) == before


def test_a_file_put_into_a_folder_spark_rewrites_is_named_not_deleted(spark, first_run, shared_data, tmp_path):
    out = _copy(first_run, tmp_path)
    (out / "corpus" / "README.txt").write_text("my note on this corpus")
    with pytest.raises(OutputInUse, match=r"corpus/README\.txt"):
        run_pipeline(_config(out, [shared_data / OTHER], [{"stage": "langid"}]), spark=spark, overwrite=True)
    with pytest.raises(OutputInUse, match=r"README\.txt.*rewrites that folder whole"):
        run_pipeline(_config(out, [shared_data / JSONL]), spark=spark, force=True)  # the same run, redone
    assert (out / "corpus" / "README.txt").read_text() == "my note on this corpus"


def test_a_trained_tokenizer_goes_under_the_output_at_the_size_the_sample_supports(
    spark, shared_data, tmp_path, caplog
):
    stages = [{"stage": "tokenize", "train": {"vocab_size": 32000, "sample_documents": 1000}}]
    out = tmp_path / "run"
    result = run_pipeline(_config(out, [shared_data / JSONL], stages), spark=spark)
    meta = json.loads((out / "tokenizer" / "tokenizer_meta.json").read_text())
    assert meta["training"]["vocab_size_requested"] == 32000
    manifest = json.loads((out / "shards" / "manifest.json").read_text())
    assert 260 < manifest["vocab_size"] < 32000 and manifest["tokens"] > 0
    written = set(json.loads((out / RUN_MARKER).read_text())["written"])  # what --overwrite may remove
    files = {
        str(p.relative_to(out))
        for p in out.glob("*/**/*")
        if p.is_file() and p.parts[len(out.parts)] in ("tokenizer", "shards")
    }
    assert files and files <= written
    assert "supports" in caplog.text and "fewer than vocab_size 32000" in caplog.text
    assert pq.read_table(result.corpus_dir).num_rows > 0
    assert not (tmp_path / "out").exists() and not Path("out/fineweb-tokenizer").exists()

    exact = [{"stage": "tokenize", "train": {"vocab_size": 32000, "exact_vocab_size": True}}]
    with pytest.raises(ValueError, match=r"Vocabulary size too high \(32000\).*vocab_size setting"):
        run_pipeline(_config(tmp_path / "exact", [shared_data / JSONL], exact), spark=spark)


def test_the_stage_reference_lists_nested_settings():
    from dataprep.core.stage_reference import describe

    [tokenize] = [s for s in describe() if s["stage"] == "tokenize"]
    names = {p["name"] for p in tokenize["params"]}
    assert {"train.vocab_size", "train.exact_vocab_size", "train.sample_documents"} <= names


def test_a_spark_run_prints_no_java_noise(shared_data, tmp_path):
    """Spark's log banner and its warnings that ask nothing of the user stay out of a local run's output."""
    done = _dataprep(
        "run", "ingest", "--input", str(shared_data / JSONL), "--output", str(tmp_path / "out"), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    for noise in ("log4j", "Setting default log level", "NativeCodeLoader", "SparkStringUtils"):
        assert noise not in done.stderr + done.stdout, noise
