"""Task-level resume on a real SparkSession: after a crash in the first step (tasks per input file) or
in a later one (tasks per part of the previous step), the rerun reuses the finished tasks, runs the
rest, and gives exactly the documents and stats of an uninterrupted run; so does a rerun after Ctrl-C,
which ends the run with one line and exit status 130. A changed config reruns them. And the error
budget stops a step early, before all of its tasks ran."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dataprep.classify.langid import default_model_path
from dataprep.core.config import load_config
from dataprep.core.stats import ErrorBudgetExceeded
from pipelines.pipeline_run import run_pipeline
from pipelines.tasks import DONE_MARKER
from resume import crash_in_step, stats_without_timings, step_info

pytestmark = pytest.mark.slow  # many processes or subprocess CLIs: scripts/test.sh --fast leaves it out

STAGES = [{"stage": "extract"}, {"stage": "exact_dedup"}, {"stage": "langid", "threshold": 0.3}]
FIRST, LATER = "00_read-extract", "02_langid"


def _inputs(shared_data: Path) -> list[Path]:
    warc = shared_data / "warc"
    return [
        warc / "wget" / "dolma-sample-0000.warc.gz",
        warc / "wget" / "IAH-urls-wget.warc.gz",
        warc / "cc-main-2024-22-whirlwind" / "whirlwind.warc.gz",
        warc / "cc-main-2014-35-head" / "CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc",
    ]


def _config(out: Path, inputs: list[Path], stages=STAGES):
    return load_config({"input": {"paths": [str(p) for p in inputs]}, "output": {"dir": str(out)}, "stages": stages})


def _documents(result) -> list[tuple]:
    return sorted((d["id"], d["text"]) for d in pq.read_table(result.corpus_dir).to_pylist())


@pytest.fixture(scope="module")
def uninterrupted(spark, shared_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("clean") / "out"
    result = run_pipeline(_config(out, _inputs(shared_data)), spark=spark)
    assert _documents(result)
    return out, _documents(result), stats_without_timings(out)


@pytest.mark.parametrize("step", [FIRST, LATER])
def test_a_rerun_after_a_crash_reuses_the_finished_tasks(spark, shared_data, tmp_path, uninterrupted, step):
    clean_dir, clean_docs, clean_stats = uninterrupted
    out = tmp_path / "out"
    shutil.copytree(clean_dir, out)  # the same run, then a crash in `step`
    finished = crash_in_step(out, step, keep_rows_of_one=True)
    result = run_pipeline(_config(out, _inputs(shared_data)), spark=spark)
    info = step_info(out, step)
    assert info["tasks_reused"] == finished and 0 < finished < info["tasks"]
    assert _documents(result) == clean_docs  # the task whose rows outlived its marker is not counted twice
    assert stats_without_timings(out) == clean_stats
    if step == LATER:
        assert [s["skipped"] for s in json.loads((out / "stats.json").read_text())["steps"]] == [True, True, False]


def test_ctrl_c_ends_the_run_in_one_line_for_the_same_command_to_resume(spark, shared_data, tmp_path, uninterrupted):
    """A real SIGINT to the process group (what Ctrl-C sends) while a step runs."""
    out = tmp_path / "out"
    config = tmp_path / "run.yaml"
    config.write_text(
        json.dumps(
            {"input": {"paths": [str(p) for p in _inputs(shared_data)]}, "output": {"dir": str(out)}, "stages": STAGES}
        )
    )
    code = "import sys; from pipelines.cli import main; sys.exit(main(sys.argv[1:]))"
    run = subprocess.Popen(
        [sys.executable, "-c", code, "run", str(config)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"},
    )
    try:
        for line in run.stdout:  # the first step is done, the second one started
            if "step 01_exact_dedup: running" in line:
                break
        os.killpg(run.pid, signal.SIGINT)
        _, err = run.communicate(timeout=240)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    said = [
        line for line in err.splitlines() if line.strip() and "Using incubator modules" not in line
    ]  # the JVM's start-up notice
    assert run.returncode == 130, err
    assert len(said) == 1 and "interrupted; to resume, run the same command again" in said[0], err
    assert not (out / "steps" / "02_langid" / DONE_MARKER).exists() and not (out / "corpus").exists()

    result = run_pipeline(_config(out, _inputs(shared_data)), spark=spark)  # the same command, again
    assert result.skipped_steps >= 1
    assert _documents(result) == uninterrupted[1] and stats_without_timings(out) == uninterrupted[2]


def test_a_changed_config_reruns_the_tasks(spark, shared_data, tmp_path, uninterrupted):
    clean_dir, _, _ = uninterrupted
    out = tmp_path / "out"
    shutil.copytree(clean_dir, out)
    crash_in_step(out, LATER)
    stages = [*STAGES[:2], {"stage": "langid", "threshold": 0.99}]
    result = run_pipeline(_config(out, _inputs(shared_data), stages), spark=spark, overwrite=True)
    info = step_info(out, LATER)
    assert info["tasks_reused"] == 0 and info["tasks"] >= 2
    fresh = tmp_path / "fresh"
    assert _documents(result) == _documents(run_pipeline(_config(fresh, _inputs(shared_data), stages), spark=spark))
    assert stats_without_timings(out) == stats_without_timings(fresh)


def test_a_stage_failing_on_every_document_stops_the_step_early(spark, shared_data, tmp_path):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    sample = _inputs(shared_data)[0]
    for i in range(12):  # more tasks than the session has cores
        shutil.copy(sample, inputs / f"{i:02d}-{sample.name}")
    model = tmp_path / "lid.ftz"
    shutil.copy(default_model_path(), model)
    config = load_config(
        {
            "input": {"paths": [str(inputs)]},
            "output": {"dir": str(tmp_path / "out")},
            "error_budget": {"min_errors": 0},
            "stages": [{"stage": "extract"}, {"stage": "langid", "model_path": str(model)}],
        }
    )
    model.unlink()  # checked, then lost: every document fails
    with pytest.raises(ErrorBudgetExceeded) as failure:
        run_pipeline(config, spark=spark)
    message = str(failure.value)
    done, total = map(int, re.search(r"stopped early with (\d+) of (\d+) tasks done", message).groups())
    assert done < total
    assert "langid (" in message and "first error: langid: MissingPath" in message and "lid.ftz" in message
    step = tmp_path / "out" / "steps" / "00_read-langid"
    assert len(list((step / "data").glob("part-*.parquet"))) == done < total
    assert not list((step / "_stats").glob("part-*.json"))  # failed tasks are redone after the fix
    assert not (step / DONE_MARKER).exists()


# -- global steps: a decision over the whole corpus, then tasks per part of the previous step --------

EXACT, MINHASH, TOKENIZE = "01_exact_dedup", "02_minhash_dedup", "03_tokenize"


def _global_config(out: Path, inputs: list[Path], tokenizer: Path):
    stages = [
        {"stage": "exact_dedup"},
        {"stage": "minhash_dedup", "sample_weights": {"1": 1, "2+": 2}},
        {
            "stage": "tokenize",
            "tokenizer": str(tokenizer),
            "tokens_per_shard": 20_000,
            "repeat_by": "sample_weight",
            "train": {"vocab_size": 800, "sample_documents": 500, "character_coverage": 0.99},
        },
    ]
    return _config(out, inputs, stages)


def _duplicated_inputs(folder: Path, shared_data: Path) -> list[Path]:
    """Four JSONL files of real documents, with exact and edited copies of some in other files."""
    from dedup_corpus import real_documents

    texts = real_documents(shared_data)
    docs = [{"id": f"doc-{i:03d}", "url": f"https://site/{i}", "text": t} for i, t in enumerate(texts)]
    docs += [{"id": f"exact-{i:03d}", "url": f"https://copy/{i}", "text": texts[i]} for i in range(0, 40, 5)]
    docs += [
        {"id": f"near-{i:03d}", "url": f"https://edit/{i}", "text": texts[i].replace(" the ", " a ", 3)}
        for i in range(2, 40, 7)
    ]
    folder.mkdir()
    paths = [folder / f"part-{k}.jsonl" for k in range(4)]
    for k, path in enumerate(paths):
        path.write_text("".join(json.dumps(d) + "\n" for d in docs[k::4]), encoding="utf-8")
    return paths


def _shards(out: Path) -> list[tuple]:
    manifest = json.loads((out / "shards" / "manifest.json").read_text())
    return sorted((s["name"], s["documents"], s["tokens"], s["bin_sha256"]) for s in manifest["shards"])


@pytest.fixture(scope="module")
def uninterrupted_global(spark, shared_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("clean-global")
    inputs = _duplicated_inputs(root / "inputs", shared_data)
    result = run_pipeline(_global_config(root / "out", inputs, root / "tokenizer"), spark=spark)
    stats = {s["stage"]: s for s in stats_without_timings(root / "out")}
    assert stats["exact_dedup"]["dropped"] == {"exact_duplicate": 8} and stats["minhash_dedup"]["dropped"]
    return root, inputs, _documents(result), stats_without_timings(root / "out"), _shards(root / "out")


@pytest.mark.parametrize("step", [EXACT, MINHASH, TOKENIZE])
def test_a_global_step_keeps_its_decision_and_finished_tasks(spark, tmp_path, uninterrupted_global, step, capsys):
    from dataprep.tokenize.verify import verify_dataset

    root, inputs, clean_docs, clean_stats, clean_shards = uninterrupted_global
    out = tmp_path / "out"
    shutil.copytree(root / "out", out)
    decided = json.loads((out / "steps" / step / "_DECIDED.json").read_text())
    finished = crash_in_step(out, step, keep_rows_of_one=True)
    capsys.readouterr()
    result = run_pipeline(_global_config(out, inputs, root / "tokenizer"), spark=spark)
    assert f"step {step}: reusing the decision a previous run made" in capsys.readouterr().out
    assert json.loads((out / "steps" / step / "_DECIDED.json").read_text())["run"] == decided["run"]
    info = step_info(out, step)
    assert info["tasks_reused"] == finished and 0 < finished < info["tasks"]
    assert _documents(result) == clean_docs and stats_without_timings(out) == clean_stats
    assert _shards(out) == clean_shards and verify_dataset(str(out / "shards")) == []


def test_a_global_step_that_died_deciding_decides_again(spark, tmp_path, uninterrupted_global):
    root, inputs, clean_docs, clean_stats, clean_shards = uninterrupted_global
    out = tmp_path / "out"
    shutil.copytree(root / "out", out)
    crash_in_step(out, MINHASH)
    (out / "steps" / MINHASH / "_DECIDED.json").unlink()  # its finished tasks applied a decision no longer saved
    result = run_pipeline(_global_config(out, inputs, root / "tokenizer"), spark=spark)
    assert step_info(out, MINHASH)["tasks_reused"] == 0
    assert (
        _documents(result) == clean_docs and stats_without_timings(out) == clean_stats and _shards(out) == clean_shards
    )


@pytest.mark.parametrize("step", [EXACT, MINHASH])
def test_a_global_step_that_died_deciding_keeps_its_prepared_tasks(spark, tmp_path, uninterrupted_global, step, capsys):
    """A dedup's hashes or signatures are computed by tasks with markers before the decision: a run that
    dies while deciding (here: its decision cannot be saved, a folder is in the way) keeps the finished ones."""
    root, inputs, clean_docs, clean_stats, clean_shards = uninterrupted_global
    out = tmp_path / "out"
    shutil.copytree(root / "out", out)
    crash_in_step(out, step)
    step_dir = out / "steps" / step
    assert not (step_dir / "_prepared").exists()  # a finished decision leaves no signatures behind
    (step_dir / "_DECIDED.json").unlink()
    (step_dir / "_DECIDED.json").mkdir()
    with pytest.raises(OSError):
        run_pipeline(_global_config(out, inputs, root / "tokenizer"), spark=spark)
    (step_dir / "_DECIDED.json").rmdir()
    markers = sorted((step_dir / "_prepared" / "_stats").glob("part-*.json"))
    assert len(markers) >= 2 and all(json.loads(m.read_text())["docs"] > 0 for m in markers)
    for marker in markers[::2]:  # and it had died among the prepare tasks
        marker.unlink()
    capsys.readouterr()
    result = run_pipeline(_global_config(out, inputs, root / "tokenizer"), spark=spark)
    assert (
        f"step {step}: reusing {len(markers[1::2])} prepared tasks, running {len(markers[::2])}"
        in capsys.readouterr().out
    )
    assert not (step_dir / "_prepared").exists()
    assert (
        _documents(result) == clean_docs and stats_without_timings(out) == clean_stats and _shards(out) == clean_shards
    )
