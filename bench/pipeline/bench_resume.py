"""What task-level resume saves: CPU of a rerun after a crash that left half of a step's tasks finished,
against what a per-step resume would redo, both on one Spark local[N] session started beforehand,
measured by CPU seconds of the whole process tree.

    python -m bench.pipeline.bench_resume [--repeat 20] [--files 8] [--cores 2] [--step first|minhash|minhash-decide]

``--step first``: a crash in the first step (extract, langid, gopher_quality), against the uninterrupted
run. ``--step minhash``: the same chain then MinHash dedup, a crash among the dedup step's tasks (its
decision saved), against a rerun of that step whole (decision and tasks removed). ``--step
minhash-decide``: a crash while MinHash decides, half of its signature (prepare) tasks finished, against
the same rerun whole.
The crash is emulated as the driver leaves it: the step's marker, later steps, the corpus, stats.json
and half of the task markers and rows removed (for ``minhash-decide``: the decision fails to save, a
folder in its way, and half of the prepare markers are then removed). Every rerun must give the same
documents (checked).
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
DEDUP = {"stage": "minhash_dedup"}


def run(job: dict, spark) -> float:
    """CPU seconds of one pipeline run (driver, JVM, Python workers) on the session ``spark``."""
    monitor = TreeMonitor().start()
    with contextlib.redirect_stdout(sys.stderr):
        run_pipeline(load_config(job), spark=spark)
    return monitor.stop()["cpu_seconds"]


def crash(out: Path, index: int, whole: bool = False) -> int:
    """Leave ``out`` as a driver lost half-way through step ``index`` would (``whole``: with none of the
    step kept, as a per-step resume would redo it); return the tasks kept."""
    step = sorted((out / "steps").iterdir())[index]
    for later in (out / "steps").iterdir():
        if later.name > step.name:
            shutil.rmtree(later)
    shutil.rmtree(out / "corpus")
    (out / "stats.json").unlink()
    (step / "_STEP_DONE.json").unlink()
    if whole:
        shutil.rmtree(step)
        return 0
    markers = sorted((step / "_stats").glob("part-*.json"))
    for marker in markers[len(markers) // 2 :]:
        marker.unlink()
        (step / "data" / marker.with_suffix(".parquet").name).unlink()
    return len(markers) // 2


def crash_deciding(job: dict, out: Path, index: int, spark) -> int:
    """Leave ``out`` as a driver lost while step ``index`` decides with half of its prepare tasks
    finished (the run is stopped by a folder where its decision is saved); return the tasks kept."""
    step = sorted((out / "steps").iterdir())[index]
    crash(out, index, whole=True)
    (step / "_DECIDED.json").mkdir(parents=True)
    with contextlib.suppress(OSError), contextlib.redirect_stdout(sys.stderr):
        run_pipeline(load_config(job), spark=spark)
    (step / "_DECIDED.json").rmdir()
    for later in (out / "steps").iterdir():
        if later.name > step.name:
            shutil.rmtree(later)
    markers = sorted((step / "_prepared" / "_stats").glob("part-*.json"))
    assert markers, "the failed run left no prepare tasks"
    for marker in markers[len(markers) // 2 :]:
        marker.unlink()
        (step / "_prepared" / "data" / marker.with_suffix(".parquet").name).unlink()
    return len(markers) // 2


def documents(out: Path) -> list[tuple]:
    return sorted((d["id"], d["text"]) for d in pq.read_table(out / "corpus", columns=["id", "text"]).to_pylist())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=20, help="copies of the 200 evaluation pages")
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument(
        "--step", choices=["first", "minhash", "minhash-decide"], default="first", help="the step the crash hits"
    )
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = get_spark(f"local[{args.cores}]", app_name="bench-resume")
    with tempfile.TemporaryDirectory(prefix="bench-resume-") as tmp:
        files = write_bench_warcs(os.path.join(tmp, "in"), repeat=args.repeat, files=args.files)
        out, again = Path(tmp) / "out", Path(tmp) / "again"
        first = args.step == "first"
        job = {"input": {"paths": files}, "output": {"dir": str(out)}, "stages": STAGES + ([] if first else [DEDUP])}
        full = run(job, spark)
        expected = documents(out)
        shutil.copytree(out, again)
        index = 0 if first else 1
        kept = crash_deciding(job, out, index, spark) if args.step == "minhash-decide" else crash(out, index)
        resumed = run(job, spark)
        step = json.loads((out / "stats.json").read_text())["steps"][index]
        assert documents(out) == expected, "the resumed run's documents differ"
        if first:
            baseline = full  # a per-step resume redoes the whole first step: the uninterrupted run
        else:
            crash(again, index, whole=True)
            baseline = run({**job, "output": {"dir": str(again)}}, spark)
            assert documents(again) == expected, "the rerun step's documents differ"
    print(
        json.dumps(
            {
                "documents": len(expected),
                "step": step,
                "tasks_kept_by_the_crash": kept,
                "cpu_seconds_uninterrupted": full,
                "cpu_seconds_step_rerun_whole": baseline,
                "cpu_seconds_resumed": resumed,
                "resumed_over_rerun_whole": round(resumed / baseline, 2),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
