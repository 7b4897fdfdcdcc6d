"""Task-level resume on a real SparkSession: after a crash in the first step (tasks per input file) or
in a later one (tasks per part of the previous step), the rerun reuses the finished tasks, runs the
rest, and gives exactly the documents and stats of an uninterrupted run; a changed config reruns
them. And the error budget stops a step early, before all of its tasks ran."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dataprep.classify.langid import default_model_path
from dataprep.core.config import load_config
from dataprep.core.stats import TIMING_FIELDS, ErrorBudgetExceeded
from pipelines.pipeline_run import DONE_MARKER, run_pipeline

STAGES = [{"stage": "extract"}, {"stage": "exact_dedup"}, {"stage": "langid", "threshold": 0.3}]
FIRST, LATER = "00_read-extract", "02_langid"


def _inputs(shared_data: Path) -> list[Path]:
    warc = shared_data / "warc"
    return [warc / "wget" / "dolma-sample-0000.warc.gz", warc / "wget" / "IAH-urls-wget.warc.gz",
            warc / "cc-main-2024-22-whirlwind" / "whirlwind.warc.gz",
            warc / "cc-main-2014-35-head" / "CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc"]


def _config(out: Path, inputs: list[Path], stages=STAGES):
    return load_config({"input": {"paths": [str(p) for p in inputs]}, "output": {"dir": str(out)}, "stages": stages})


def _documents(result) -> list[tuple]:
    return sorted((d["id"], d["text"]) for d in pq.read_table(result.corpus_dir).to_pylist())


def _stats(out: Path) -> list[dict]:
    """stats.json without timings (which differ from run to run)."""
    return [{k: v for k, v in s.items() if k not in TIMING_FIELDS} for s in json.loads((out / "stats.json").read_text())["stages"]]


def _step_info(out: Path, step: str) -> dict:
    return next(s for s in json.loads((out / "stats.json").read_text())["steps"] if s["step"] == step)


def _crash(out: Path, step: str, keep_rows_of_one: bool = False) -> int:
    """Leave ``out`` as a driver lost in ``step`` would: no step marker, no later steps, no corpus,
    and only half of the step's tasks finished (one of the others with its rows written but no marker,
    when asked). Returns how many finished tasks are left."""
    step_dir = out / "steps" / step
    for later in sorted((out / "steps").iterdir()):
        if later.name > step:
            shutil.rmtree(later)
    shutil.rmtree(out / "corpus")
    (out / "stats.json").unlink()
    (step_dir / DONE_MARKER).unlink()
    markers = sorted((step_dir / "_stats").glob("part-*.json"))
    assert len(markers) >= 2, "the step needs several tasks for this test"
    lost = markers[len(markers) // 2:]
    for i, marker in enumerate(lost):
        marker.unlink()
        if not (keep_rows_of_one and i == 0):
            (step_dir / "data" / marker.with_suffix(".parquet").name).unlink()
    return len(markers) - len(lost)


@pytest.fixture(scope="module")
def uninterrupted(spark, shared_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("clean") / "out"
    result = run_pipeline(_config(out, _inputs(shared_data)), spark=spark)
    assert _documents(result)
    return out, _documents(result), _stats(out)


@pytest.mark.parametrize("step", [FIRST, LATER])
def test_a_rerun_after_a_crash_reuses_the_finished_tasks(spark, shared_data, tmp_path, uninterrupted, step):
    clean_dir, clean_docs, clean_stats = uninterrupted
    out = tmp_path / "out"
    shutil.copytree(clean_dir, out)  # the same run, then a crash in `step`
    finished = _crash(out, step, keep_rows_of_one=True)
    result = run_pipeline(_config(out, _inputs(shared_data)), spark=spark)
    info = _step_info(out, step)
    assert info["tasks_reused"] == finished and 0 < finished < info["tasks"]
    assert _documents(result) == clean_docs  # the task whose rows outlived its marker is not counted twice
    assert _stats(out) == clean_stats
    if step == LATER:
        assert [s["skipped"] for s in json.loads((out / "stats.json").read_text())["steps"]] == [True, True, False]


def test_a_changed_config_reruns_the_tasks(spark, shared_data, tmp_path, uninterrupted):
    clean_dir, _, _ = uninterrupted
    out = tmp_path / "out"
    shutil.copytree(clean_dir, out)
    _crash(out, LATER)
    stages = [*STAGES[:2], {"stage": "langid", "threshold": 0.99}]
    result = run_pipeline(_config(out, _inputs(shared_data), stages), spark=spark)
    info = _step_info(out, LATER)
    assert info["tasks_reused"] == 0 and info["tasks"] >= 2
    fresh = tmp_path / "fresh"
    assert _documents(result) == _documents(run_pipeline(_config(fresh, _inputs(shared_data), stages), spark=spark))
    assert _stats(out) == _stats(fresh)


def test_a_stage_failing_on_every_document_stops_the_step_early(spark, shared_data, tmp_path):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    sample = _inputs(shared_data)[0]
    for i in range(12):  # more tasks than the session has cores
        shutil.copy(sample, inputs / f"{i:02d}-{sample.name}")
    model = tmp_path / "lid.ftz"
    shutil.copy(default_model_path(), model)
    config = load_config({"input": {"paths": [str(inputs)]}, "output": {"dir": str(tmp_path / "out")},
                          "error_budget": {"min_errors": 0},
                          "stages": [{"stage": "extract"}, {"stage": "langid", "model_path": str(model)}]})
    model.unlink()  # checked, then lost: every document fails
    with pytest.raises(ErrorBudgetExceeded) as failure:
        run_pipeline(config, spark=spark)
    message = str(failure.value)
    done, total = map(int, re.search(r"stopped early with (\d+) of (\d+) tasks done", message).groups())
    assert done < total
    assert "langid (" in message and "first error: langid: FileNotFoundError" in message and "lid.ftz" in message
    step = tmp_path / "out" / "steps" / "00_read-langid"
    assert len(list((step / "data").glob("part-*.parquet"))) == done < total
    assert not list((step / "_stats").glob("part-*.json"))  # failed tasks are redone after the fix
    assert not (step / DONE_MARKER).exists()
