"""The progress line a running step prints: tasks done of total, documents/s and an ETA."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

from dataprep.core.units import duration, human


class Progress:
    """Every few seconds, the running step's tasks done of total, documents/s and an ETA (a driver
    thread reading Spark's status tracker and a documents accumulator, which tasks add to as they
    finish); ``finish`` prints the last line, N/N."""

    def __init__(self, spark, label: str, unit: str = "tasks", total: int | None = None, interval: float = 5.0, counts_docs: bool = True):
        self.tracker = spark.sparkContext.statusTracker()
        self.docs = spark.sparkContext.accumulator(0)
        self.label, self.interval, self.unit, self.total, self.counts_docs = label, interval, unit, total, counts_docs
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._last = None
        self._t0 = time.perf_counter()

    def line(self, done: int, total: int) -> str:
        elapsed = time.perf_counter() - self._t0
        docs = self.docs.value
        text = f"  [{self.label}] {done}/{total} {self.unit}"
        if self.counts_docs:
            text += f", {human(docs)} docs, {human(docs / max(elapsed, 1e-9))} docs/s"
        if 0 < done < total:
            text += f", ETA {duration(elapsed / done * (total - done))}"
        return text + f" ({duration(elapsed)})"

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            done = total = 0
            for stage_id in self.tracker.getActiveStageIds():
                info = self.tracker.getStageInfo(stage_id)
                if info:
                    done += info.numCompletedTasks
                    total += info.numTasks
            if total and (done, total, self.docs.value) != self._last:
                self._last = (done, total, self.docs.value)
                self.total = self.total or total
                print(self.line(done, total), flush=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=1)

    def finish(self, docs: int | None = None) -> None:
        """The last line: every task done (``docs`` when the step counted them itself)."""
        if docs is not None and not self.docs.value:
            self.docs.add(docs)
        total = self.total or (self._last[1] if self._last else 1)
        print(self.line(total, total), flush=True)


def executor_seconds(spark, group: str) -> tuple[float, float]:
    """Seconds the Spark tasks of a job group ran, and the JVM CPU seconds within them, summed over its
    stages (Spark's task metrics, kept by the driver with or without the web UI). A task's run time holds
    the Python workers it waited for; its CPU time is the JVM's alone."""
    tracker = spark.sparkContext.statusTracker()
    store = spark.sparkContext._jsc.sc().statusStore()
    stages = {stage for job in tracker.getJobIdsForGroup(group) if tracker.getJobInfo(job) for stage in tracker.getJobInfo(job).stageIds}
    run_ms = cpu_ns = 0
    for stage in stages:
        try:
            data = store.lastStageAttempt(stage)
        except Exception:  # noqa: BLE001 - a stage the store no longer retains is not counted
            continue
        run_ms += data.executorRunTime()
        cpu_ns += data.executorCpuTime()
    return run_ms / 1000, cpu_ns / 1e9


_step_python_cpu = None  # driver side: the accumulator of the whole-corpus step being planned, if any


@contextmanager
def python_cpu(spark):
    """While a whole-corpus step plans its DataFrames, ``timed`` functions add their Python workers' CPU
    seconds to the accumulator this yields (Spark's task metrics hold the JVM's CPU only)."""
    global _step_python_cpu
    _step_python_cpu = spark.sparkContext.accumulator(0.0)
    try:
        yield _step_python_cpu
    finally:
        _step_python_cpu = None


def timed(fn):
    """``fn`` (a ``mapInArrow`` function) counting its CPU into the step's accumulator, if one is active."""
    total = _step_python_cpu
    if total is None:
        return fn

    def counted(batches):
        cpu0 = time.process_time()
        try:
            yield from fn(batches)
        finally:
            total.add(time.process_time() - cpu0)

    return counted
