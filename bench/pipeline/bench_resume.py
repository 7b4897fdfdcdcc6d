"""What task-level resume saves: CPU of a rerun after a crash that left half of the first step's tasks
finished, against the uninterrupted run (what a per-step resume would redo), both on one Spark
local[N] session started beforehand, measured by CPU seconds of the whole process tree.

    python -m bench.pipeline.bench_resume [--repeat 20] [--files 8] [--cores 2]

The crash is emulated as the driver leaves it: the step's marker, the corpus, stats.json and half of
the task markers and rows removed. The rerun must give the same documents (checked).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pyarrow.parquet as pq

from bench.common.make_bench_warc import write_bench_warcs
from bench.common.proctree import TreeMonitor
from dataprep.core.config import load_config
from pipelines.pipeline_run import run_pipeline
from pipelines.spark import get_spark

STAGES = [{"stage": "extract"}, {"stage": "langid"}, {"stage": "gopher_quality"}]


def run(job: dict, spark) -> float:
    """CPU seconds of one pipeline run (driver, JVM, Python workers) on the session ``spark``."""
    monitor = TreeMonitor().start()
    with contextlib.redirect_stdout(sys.stderr):
        run_pipeline(load_config(job), spark=spark)
    return monitor.stop()["cpu_seconds"]


def crash(out: Path) -> int:
    """Leave ``out`` as a driver lost half-way through its first step would; return the tasks kept."""
    step = next((out / "steps").iterdir())
    for later in (out / "steps").iterdir():
        if later != step:
            shutil.rmtree(later)
    shutil.rmtree(out / "corpus")
    (out / "stats.json").unlink()
    (step / "_STEP_DONE.json").unlink()
    markers = sorted((step / "_stats").glob("part-*.json"))
    for marker in markers[len(markers) // 2:]:
        marker.unlink()
        (step / "data" / marker.with_suffix(".parquet").name).unlink()
    return len(markers) // 2


def documents(out: Path) -> list[tuple]:
    return sorted((d["id"], d["text"]) for d in pq.read_table(out / "corpus", columns=["id", "text"]).to_pylist())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=20, help="copies of the 200 evaluation pages")
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--cores", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = get_spark(f"local[{args.cores}]", app_name="bench-resume")
    with tempfile.TemporaryDirectory(prefix="bench-resume-") as tmp:
        files = write_bench_warcs(os.path.join(tmp, "in"), repeat=args.repeat, files=args.files)
        out = Path(tmp) / "out"
        job = {"input": {"paths": files}, "output": {"dir": str(out)}, "stages": STAGES}
        full = run(job, spark)
        expected = documents(out)
        kept = crash(out)
        resumed = run(job, spark)
        steps = json.loads((out / "stats.json").read_text())["steps"]
        assert documents(out) == expected, "the resumed run's documents differ"
    print(json.dumps({"documents": len(expected), "first_step": steps[0], "tasks_kept_by_the_crash": kept,
                      "cpu_seconds_uninterrupted": full, "cpu_seconds_resumed": resumed,
                      "resumed_over_uninterrupted": round(resumed / full, 2)}, indent=1))


if __name__ == "__main__":
    main()
