"""The error budget of a step: while it runs, a stage failing on most documents stops the job early;
when it ends, a stage over the budget fails it (``check_budget``, ``fail_step``).

Each task adds its stats to an accumulator as it finishes; a driver thread merges them and, once the
finished tasks show a stage over the budget with errors on most of its documents, cancels the step's
job group. The pipeline then fails the step naming the stage and its first error, instead of after
every task of a snapshot-sized step ran. The end-of-step check still applies the exact budget.
"""

from __future__ import annotations

import json
import sys
import threading

from pyspark.accumulators import AccumulatorParam

from dataprep.core.stats import StageStats, budget_exceeded, describe_errors, merge_all, over_budget
from dataprep.core.storage import atomic_write_text, join_path
from pipelines.tasks import remove_failed

ERRORS_FILE = "_ERRORS.json"  # a failed step's stages over the budget, with their error samples

# Stop early only when errors are this share of the documents seen or more: early tasks are a
# sample, and a stage near its budget is left for the exact check at the end of the step.
EARLY_FRACTION = 0.5


class _StatsParam(AccumulatorParam):
    def zero(self, value):
        return []

    def addInPlace(self, value1, value2):
        return merge_all(list(value1) + list(value2))


class ErrorWatch:
    """Watches the finished tasks' stats of one step; ``failed`` holds the stages that stopped it."""

    def __init__(self, spark, budget, job_group: str, interval: float = 2.0):
        self.context = spark.sparkContext
        self.stats = self.context.accumulator([], _StatsParam())
        self.budget, self.job_group, self.interval = budget, job_group, interval
        self.failed: list[StageStats] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def check(self) -> bool:
        """Whether the tasks finished so far put a stage over the budget on most of its documents
        (then the step's jobs are cancelled)."""
        if not self.failed:
            fraction = max(self.budget.max_fraction, EARLY_FRACTION)
            self.failed = over_budget(self.stats.value, fraction, self.budget.min_errors)
            if self.failed:
                self.context.cancelJobGroup(self.job_group)
        return bool(self.failed)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval) and not self.check():
            pass

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=self.interval + 1)


def check_budget(spark, step_name: str, step_dir: str, stats: list[StageStats], budget) -> None:
    """Fail the step (no marker) when a stage's errors exceed ``budget`` (the config's ``error_budget``)."""
    failed = over_budget(stats, budget.max_fraction, budget.min_errors)
    if failed:
        fail_step(spark, step_name, step_dir, failed, budget)


def fail_step(spark, step_name: str, step_dir: str, failed: list[StageStats], budget, early: str = "") -> None:
    """Save and print what went wrong, remove the failed stages' tasks so a rerun after the fix redoes
    them, then raise naming each stage and its first error."""
    report = describe_errors(failed, budget.max_fraction, budget.min_errors)
    remove_failed(spark, step_dir, {s.stage for s in failed})
    path = join_path(step_dir, ERRORS_FILE)
    atomic_write_text(path, json.dumps({"stages": [s.to_dict() for s in failed]}, indent=1, ensure_ascii=False))
    print(
        f"step {step_name}: FAILED, errors over budget\n{report}\nall error samples: {path}",
        file=sys.stderr,
        flush=True,
    )
    raise budget_exceeded(step_name, failed, path, early)
