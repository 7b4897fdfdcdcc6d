"""Runs datatrove pipeline steps one after another, each a LocalPipelineExecutor as in its examples,
measuring the whole process tree (bench/common/proctree.py). Imported by the datatrove_*.py runners, which
run in datatrove's own venv."""

from __future__ import annotations

import time

from bench.common.proctree import TreeMonitor


def run_steps(steps: dict[str, tuple[list, int]], work: str, workers: int) -> dict:
    """``steps``: name -> (pipeline, tasks). Returns wall seconds per step (``NAME_seconds``) and in
    all (``seconds``), CPU seconds and peak memory of the process tree."""
    from datatrove.executor import LocalPipelineExecutor

    report = {}
    total = TreeMonitor().start()
    for name, (pipeline, tasks) in steps.items():
        t0 = time.perf_counter()
        LocalPipelineExecutor(
            pipeline=pipeline, tasks=tasks, workers=min(workers, tasks), logging_dir=f"{work}/logs/{name}"
        ).run()
        report[f"{name}_seconds"] = round(time.perf_counter() - t0, 1)
    report.update(total.stop())
    report.pop("peak_python_process")
    report["seconds"] = round(sum(report[f"{name}_seconds"] for name in steps), 1)
    return report
