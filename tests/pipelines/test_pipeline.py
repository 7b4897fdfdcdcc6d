"""The Spark pipeline runner: config validation, every shared WARC/WET sample end to end, stats,
resume after kill -9, empty and missing input."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dataprep.core.config import ConfigError, load_config
from dataprep.core.runner import run_stages
from dataprep.core.stats import TIMING_FIELDS
from pipelines.pipeline_run import NoReadableInput, run_pipeline

ROOT = Path(__file__).resolve().parents[2]
INGEST_STAGES = [{"stage": "extract"}, {"stage": "langid", "threshold": 0.3}]


def _config(tmp_path, paths, stages=INGEST_STAGES, **output):
    return load_config(
        {
            "input": {"paths": [str(p) for p in paths]},
            "output": {"dir": str(tmp_path / "out"), **output},
            "stages": stages,
        }
    )


def _corpus(result) -> list[dict]:
    table = pq.read_table(result.corpus_dir)
    return sorted(table.to_pylist(), key=lambda d: d["id"])


# -- configuration --------------------------------------------------------------------------------


def test_config_mistakes_are_named_by_their_key():
    with pytest.raises(ConfigError, match="input.pathz: unknown key"):
        load_config({"input": {"pathz": ["x"]}})
    with pytest.raises(ConfigError, match=r"stages\[0\]: unknown stage 'nope'"):
        load_config({"stages": [{"stage": "nope"}]})
    with pytest.raises(ConfigError, match=r"stages\[1\] \(langid\): threshhold: unknown key"):
        load_config({"stages": [{"stage": "extract"}, {"stage": "langid", "threshhold": 0.5}]})
    with pytest.raises(ConfigError, match=r"stages\[0\] \(extract\)"):
        load_config({"stages": [{"stage": "extract", "engine": "no-such-engine"}]})
    with pytest.raises(ConfigError, match="each entry needs a 'stage: NAME' key"):
        load_config({"stages": [{"name": "extract"}]})


def test_presets_are_included_relative_to_the_config(tmp_path):
    (tmp_path / "presets").mkdir()
    (tmp_path / "presets" / "ingest.yaml").write_text("stages:\n  - stage: extract\n  - stage: langid\n")
    (tmp_path / "job.yaml").write_text("input: {paths: [x]}\nstages:\n  - include: presets/ingest.yaml\n")
    assert [s.name for s in load_config(str(tmp_path / "job.yaml")).stages] == ["extract", "langid"]
    (tmp_path / "bad.yaml").write_text("stages:\n  - include: presets/missing.yaml\n")
    with pytest.raises(ConfigError, match="missing.yaml"):
        load_config(str(tmp_path / "bad.yaml"))


def test_every_shipped_config_validates():
    configs = sorted((ROOT / "configs" / "pipeline").glob("*.yaml"))
    assert configs, "no pipeline configs shipped"
    for path in configs:
        # demo.yaml's perplexity model and demo_reference.yaml's tokenizer are made by scripts/demo.sh first
        load_config(str(path), check_assets=path.name not in ("demo.yaml", "demo_reference.yaml"))


def test_every_config_the_readme_names_exists_and_loads():
    """A user copies these commands first: each config they name must exist and load (models included)."""
    from pretrain.config.loading import load_model_config, load_train_config

    readme = (ROOT / "README.md").read_text()
    written = set(re.findall(r"--output (configs/\S+\.yaml)", readme))  # outputs of `pretrain size/plan --output`
    named = sorted(set(re.findall(r"configs/[\w/.-]+\.yaml", readme)) - written)
    assert "configs/pipeline/fineweb.yaml" in named and len(named) >= 5
    # a training config's `vocab_size: auto` reads its shards, which the demo writes
    # (tests/pretrain/train/test_tiny_cpu_config.py)
    loaders = {
        "pipeline": load_config,
        "model": load_model_config,
        "train": lambda path: load_train_config(path, sets=["model.vocab_size=32000"]),
    }
    for path in named:
        assert (ROOT / path).is_file(), f"README names {path}, which does not exist"
        try:
            loaders[path.split("/")[1]](str(ROOT / path))
        except ConfigError as exc:  # a config over the demo's shards loads once the demo has run
            assert "out/demo/" in str(exc) and "build its token shards first" in str(exc), exc
    fineweb = [s.name for s in load_config(str(ROOT / "configs/pipeline/fineweb.yaml")).stages]
    for stage in ("extract", "langid", "fineweb_quality", "toxicity", "pii", "minhash_dedup", "tokenize"):
        assert stage in fineweb


# -- running on Spark -----------------------------------------------------------------------------


def _samples(shared_data: Path) -> list[Path]:
    warc = shared_data / "warc"
    return sorted(p for p in warc.rglob("*") if p.is_file() and ".wat" not in p.name)


def test_every_sample_end_to_end_matches_the_no_spark_run(spark, shared_data, tmp_path):
    """All WARC/WET samples (malformed ones included) through Spark: no crash, bad records counted as
    errors, and exactly the documents the same stages keep without Spark."""
    samples = _samples(shared_data)
    config = _config(tmp_path, samples, write_dropped=True)
    result = run_pipeline(config, spark=spark)
    stats = {s.stage: s for s in result.stats}
    assert result.files == len(samples)
    assert stats["read"].errors >= 1, "the truncated fixture should count a read error"
    assert stats["read"].dropped["non_html"] > 0 or any(r.startswith("non_html") for r in stats["read"].dropped)
    corpus = _corpus(result)
    assert len(corpus) == stats["langid"].docs_kept > 0
    assert all(doc["text"] and doc["lang"] for doc in corpus)
    assert len({(d["source"], d["id"]) for d in corpus}) == len(corpus), "ids must be unique within a file"

    # Same stages, same files, no Spark.
    from dataprep.core.runner import conform
    from dataprep.core.stage import concat
    from dataprep.readers import READ_SCHEMA, iter_documents

    tables = [conform(r.kept, READ_SCHEMA) for p in samples for r in iter_documents(str(p), config.input)]
    local = run_stages(config.stages, concat(tables))[0].kept
    assert sorted(local.column("id").to_pylist()) == sorted(d["id"] for d in corpus)
    assert sorted(local.column("text").to_pylist()) == sorted(d["text"] for d in corpus)

    saved = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert [s["stage"] for s in saved["stages"]] == ["read", "extract", "langid"]
    # Funnel arithmetic: what a stage keeps is what the next one gets.
    assert stats["read"].docs_kept == stats["extract"].docs_in
    assert stats["extract"].docs_kept == stats["langid"].docs_in


def test_rerun_of_a_finished_pipeline_does_no_work(spark, shared_data, tmp_path):
    sample = shared_data / "warc" / "wget" / "dolma-sample-0000.warc.gz"
    config = _config(tmp_path, [sample])
    first = run_pipeline(config, spark=spark)
    first_docs = _corpus(first)
    second = run_pipeline(config, spark=spark)
    assert first.skipped_steps == 0 and second.skipped_steps == 1
    assert _corpus(second) == first_docs
    # A changed stage parameter invalidates that step and everything after it (a replacement: --overwrite).
    config.stages[1].languages = ["en"]  # the sample is English: the same documents, but from a rerun step
    third = run_pipeline(config, spark=spark, overwrite=True)
    assert third.skipped_steps == 0 and third.steps[0]["tasks_reused"] == 0
    assert _corpus(third) == first_docs


def test_empty_input_fails_naming_why(spark, tmp_path):
    """Input with nothing to read fails, naming why, instead of writing an empty corpus with exit 0."""
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(NoReadableInput, match="no readable input in 1 file: 1 empty"):
        run_pipeline(_config(tmp_path, [empty]), spark=spark)
    assert not (tmp_path / "out" / "corpus").exists()


def test_missing_input_fails_naming_the_path(spark, tmp_path):
    with pytest.raises(FileNotFoundError, match="no-such-file"):
        run_pipeline(_config(tmp_path, [tmp_path / "no-such-file.warc.gz"]), spark=spark)
    listing = tmp_path / "warc.paths"
    listing.write_text("# a listing naming no file\n")
    with pytest.raises(FileNotFoundError, match="warc.paths' names no file"):
        run_pipeline(_config(tmp_path, [listing]), spark=spark)


@pytest.mark.slow
def test_kill_9_in_the_middle_then_resume_gives_the_same_documents(shared_data, tmp_path):
    """A separate driver process is killed with SIGKILL once some tasks of its first step finished; the
    rerun reuses exactly those tasks (stats.json says so) and produces the documents and stats of an
    uninterrupted run."""
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    for copy in range(4):  # enough files that the kill lands mid-step
        for p in _samples(shared_data):
            (inputs / f"{copy}-{p.name}").write_bytes(p.read_bytes())
    cfg = tmp_path / "job.yaml"
    cfg.write_text(
        json.dumps(
            {
                "input": {"paths": [str(inputs)], "batch_size": 5},
                "output": {"dir": str(tmp_path / "killed")},
                "spark": {"master": "local[2]"},
                "stages": INGEST_STAGES,
            }
        )
    )
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    cmd = [sys.executable, "-m", "pipelines.cli", "run", str(cfg)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    step = tmp_path / "killed" / "steps" / "00_read-langid"
    deadline = time.time() + 300
    while proc.poll() is None and time.time() < deadline:
        if list((step / "_stats").glob("part-*.json")):  # a task has finished
            break
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (step / "_STEP_DONE.json").exists(), "the step finished before it was killed"
    finished = len(list((step / "_stats").glob("part-*.json")))
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    subprocess.run(cmd + ["--output", str(tmp_path / "clean")], env=env, check=True, capture_output=True)
    key = lambda d: (d["source"], d["id"])  # noqa: E731
    killed = sorted(pq.read_table(tmp_path / "killed" / "corpus").to_pylist(), key=key)
    clean = sorted(pq.read_table(tmp_path / "clean" / "corpus").to_pylist(), key=key)
    assert len(clean) > 0 and killed == clean
    resumed, uninterrupted = (json.loads((tmp_path / run / "stats.json").read_text()) for run in ("killed", "clean"))
    [step_info] = resumed["steps"]
    # Python workers outlive their driver by a moment (pyspark's daemon has a process group of its own):
    # a task they finish after the kill is complete, and reused too
    assert 0 < finished <= step_info["tasks_reused"] < step_info["tasks"]
    assert _counts(resumed) == _counts(uninterrupted)


def _counts(stats: dict) -> list[dict]:
    """A stats.json without its timings (which differ from run to run)."""
    return [{k: v for k, v in s.items() if k not in TIMING_FIELDS} for s in stats["stages"]]


def test_every_stage_loads_with_a_docstring():
    """A stage that fails to load would be unusable from configs."""
    from dataprep.core.registry import stage_class, stage_names

    names = stage_names()
    assert {"extract", "langid", "gopher_quality", "minhash_dedup", "tokenize"} <= set(names)
    for name in names:
        cls = stage_class(name)
        assert cls.name == name and (cls.__doc__ or "").strip(), f"stage {name} has no docstring"


def test_every_stage_is_documented(capsys):
    """Each stage is in the config reference (``dataprep stages``, with a summary) and in docs/stages.md's
    table of stages."""
    from dataprep.core.registry import stage_names
    from pipelines.cli import main as dataprep_cli

    names = stage_names()
    assert dataprep_cli(["stages"]) == 0
    out = capsys.readouterr().out
    table = (ROOT / "docs" / "stages.md").read_text(encoding="utf-8")
    for name in names:
        assert f"{name} (document stage)" in out or f"{name} (global stage)" in out, name
        assert f"| `{name}` |" in table, f"stage {name} is missing from docs/stages.md's table of stages"


def test_workers_fork_from_a_daemon_that_loaded_the_pipeline_once(spark):
    """Local sessions fork Python workers from pipelines.worker_daemon, which imported the stages and
    loaded lid.176 (and lingua's models, where installed) before forking, and reuse each worker for
    task after task."""
    from dataprep.classify.langid import lingua_installed

    def worker_state(_):  # nested: pickled by value, as the test module is not importable by workers
        import os
        import sys

        from dataprep.classify.langid import lingua_detector, load_model

        with open(f"/proc/{os.getppid()}/cmdline", "rb") as fh:
            parent = fh.read().replace(b"\0", b" ").decode()
        zipped = sum(".zip" in (getattr(module, "__file__", None) or "") for module in list(sys.modules.values()))
        yield os.getpid(), parent, load_model.cache_info().currsize + lingua_detector.cache_info().currsize, zipped

    states = spark.sparkContext.parallelize(range(16), 16).mapPartitions(worker_state).collect()
    assert all("pipelines.worker_daemon" in parent for _, parent, _, _ in states)
    assert all(
        zipped == 0 for *_, zipped in states
    )  # pyspark from its installed package: compiled once, not per process
    loaded = 2 if lingua_installed() else 1
    assert all(models >= loaded for _, _, models, _ in states)  # no task loaded them: the daemon did
    assert len({pid for pid, *_ in states}) < len(states)  # workers are reused across tasks


def test_only_the_installed_pysparks_own_zips_leave_the_worker_path(tmp_path):
    """The zips of a Spark distribution (or of a pyspark not on the path) stay: their code may differ."""
    from pipelines.worker_daemon import use_installed_pyspark

    site = tmp_path / "site-packages"
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    (site / "py4j-0.10.9.9.dist-info").mkdir()
    own = [str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip")]
    others = [
        "/opt/spark/python/lib/pyspark.zip",
        "/opt/spark/python/lib/py4j-0.10.9.9-src.zip",
        str(lib / "py4j-0.10.9.7-src.zip"),
    ]
    path = [*own, *others, str(site)]
    use_installed_pyspark(path)
    assert path == [*others, str(site)]
    alone = [*own]  # the installed pyspark is not on the path: keep its zips
    use_installed_pyspark(alone)
    assert alone == own


def test_small_local_files_share_first_step_tasks(tmp_path):
    """Many small files are packed into a few tasks (in order, each file once, every core busy); large
    files, few files and files on object stores keep a task each."""
    from pipelines.steps import TASK_BYTES, file_tasks

    small = []
    for i in range(40):
        small.append(str(tmp_path / f"s{i:02d}.warc.gz"))
        Path(small[-1]).write_bytes(b"x" * 1000)
    tasks = file_tasks(small, slots=2)
    assert [f for t in tasks for f in t] == small
    assert 4 <= len(tasks) <= 5 and all(len(t) > 1 for t in tasks)
    assert file_tasks(small[:4], slots=2) == [[f] for f in small[:4]]  # no more files than 2 x slots
    assert file_tasks(small + ["s3://bucket/a.warc.gz"], slots=2) == [[f] for f in small + ["s3://bucket/a.warc.gz"]]
    big = str(tmp_path / "big.warc.gz")
    with open(big, "wb") as fh:
        fh.truncate(TASK_BYTES + 1)
    tasks = file_tasks(small[:10] + [big] + small[10:], slots=2)
    assert [big] in tasks and [f for t in tasks for f in t] == small[:10] + [big] + small[10:]
