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

    def __init__(
        self,
        spark,
        label: str,
        unit: str = "tasks",
        total: int | None = None,
        interval: float = 5.0,
        counts_docs: bool = True,
    ):
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


def _group_stages(spark, group: str) -> list:
    """Spark's status-store record of each stage the jobs of ``group`` ran (stages it no longer retains,
    or skipped ones, left out)."""
    tracker = spark.sparkContext.statusTracker()
    store = spark.sparkContext._jsc.sc().statusStore()
    ids = {
        stage
        for job in tracker.getJobIdsForGroup(group)
        if tracker.getJobInfo(job)
        for stage in tracker.getJobInfo(job).stageIds
    }
    stages = []
    for stage in sorted(ids):
        try:
            stages.append(store.lastStageAttempt(stage))
        except Exception:  # noqa: BLE001 - a stage the store no longer retains is not counted
            continue
    return stages


def executor_seconds(spark, group: str) -> tuple[float, float]:
    """Seconds the Spark tasks of a job group ran, and the JVM CPU seconds within them, summed over its
    stages (Spark's task metrics, kept by the driver with or without the web UI). A task's run time holds
    the Python workers it waited for; its CPU time is the JVM's alone."""
    stages = _group_stages(spark, group)
    return sum(s.executorRunTime() for s in stages) / 1000, sum(s.executorCpuTime() for s in stages) / 1e9


def executor_fixed_cpu_seconds(spark, group: str) -> float:
    """The JVM CPU seconds of a job group's tasks that do not grow with its documents: per stage, its
    costliest task (the one that started the stage: loading and compiling its code, which the stage's
    other tasks then reuse, on top of a task's own start). One status-store call per stage, none per task."""
    store = spark.sparkContext._jsc.sc().statusStore()
    gateway = spark.sparkContext._gateway
    costliest = gateway.new_array(gateway.jvm.double, 1)
    costliest[0] = 1.0  # the quantile of task CPU times: their maximum
    fixed_ns = 0.0
    for data in _group_stages(spark, group):
        summary = store.taskSummary(data.stageId(), data.attemptId(), costliest)
        if summary.isDefined():
            fixed_ns += summary.get().executorCpuTime().apply(0)
    return fixed_ns / 1e9


# Rows of each call's first batch that ``timed`` hands on as a batch of their own: the CPU until the function
# asks for the rest, beyond their share of the cost per row, is what a call costs before its documents
HEAD_ROWS = 64


class StepCpu:
    """The Python workers' CPU of a whole-corpus step: ``value`` in all, ``fixed`` the part that does
    not grow with documents (per ``mapInArrow`` call, what it cost beyond its rows)."""

    def __init__(self, spark):
        self.total = spark.sparkContext.accumulator(0.0)
        self.fixed_total = spark.sparkContext.accumulator(0.0)

    @property
    def value(self) -> float:
        return self.total.value

    @property
    def fixed(self) -> float:
        return self.fixed_total.value


_step_python_cpu: StepCpu | None = None  # driver side: the whole-corpus step being planned, if any


@contextmanager
def python_cpu(spark):
    """While a whole-corpus step plans its DataFrames, ``timed`` functions add their Python workers' CPU
    seconds to the ``StepCpu`` this yields (Spark's task metrics hold the JVM's CPU only)."""
    global _step_python_cpu
    _step_python_cpu = StepCpu(spark)
    try:
        yield _step_python_cpu
    finally:
        _step_python_cpu = None


def _call_fixed_cost(cpu: float, rows: int, head_cpu: float, head_rows: int) -> float:
    """What a call's head took beyond its rows' share of the cost per row of the rest (none without a head)."""
    if not head_rows or rows <= head_rows:
        return 0.0
    per_row = (cpu - head_cpu) / (rows - head_rows)
    return min(head_cpu, max(0.0, head_cpu - per_row * head_rows))


def timed(fn):
    """``fn`` (a ``mapInArrow`` function) counting its CPU into the step's accumulators, if any are active:
    all of it, and what each call cost before its documents (its first ``HEAD_ROWS`` rows are handed on
    as a batch of their own, timed apart)."""
    step = _step_python_cpu
    if step is None:
        return fn
    total, fixed = step.total, step.fixed_total

    def counted(batches):
        cpu0 = time.process_time()
        seen = {"rows": 0, "head_rows": 0, "head_cpu": 0.0}

        def split_head():
            for i, rb in enumerate(batches):
                seen["rows"] += rb.num_rows
                head = min(HEAD_ROWS, rb.num_rows // 2) if i == 0 else 0
                if head:
                    yield rb.slice(0, head)
                    seen["head_rows"], seen["head_cpu"] = head, time.process_time() - cpu0  # fn asks for more
                    yield rb.slice(head)
                else:
                    yield rb

        try:
            yield from fn(split_head())
        finally:
            cpu = time.process_time() - cpu0
            total.add(cpu)
            fixed.add(_call_fixed_cost(cpu, seen["rows"], seen["head_cpu"], seen["head_rows"]))

    return counted
