"""A pipeline run killed in a step with half its tasks finished, and the checks that a rerun reuses them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from dataprep.core.stats import TIMING_FIELDS
from pipelines.pipeline_run import run_pipeline
from pipelines.tasks import DONE_MARKER


def stats_without_timings(out: Path) -> list[dict]:
    """stats.json without timings (which differ from run to run)."""
    return [
        {k: v for k, v in s.items() if k not in TIMING_FIELDS}
        for s in json.loads((out / "stats.json").read_text())["stages"]
    ]


def step_info(out: Path, step: str) -> dict:
    return next(s for s in json.loads((out / "stats.json").read_text())["steps"] if s["step"] == step)


def crash_in_step(out: Path, step: str, keep_rows_of_one: bool = False) -> int:
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
    lost = markers[len(markers) // 2 :]
    for i, marker in enumerate(lost):
        marker.unlink()
        if not (keep_rows_of_one and i == 0):
            (step_dir / "data" / marker.with_suffix(".parquet").name).unlink()
    return len(markers) - len(lost)


def rerun_after_a_crash(config, spark):
    """Kill ``config``'s finished run in its first step with half of the step's tasks finished, rerun it, and
    check that the rerun reused them and gave the same stats. Returns the rerun's result."""
    out = Path(config.output.dir)
    step, stats = json.loads((out / "stats.json").read_text())["steps"][0]["step"], stats_without_timings(out)
    finished = crash_in_step(out, step)
    result = run_pipeline(config, spark=spark)
    assert step_info(out, step)["tasks_reused"] == finished > 0
    assert stats_without_timings(out) == stats
    return result
