"""How a pipeline's stages become Spark steps, and how each step runs.

Consecutive ``DocumentStage``s fuse into one step that runs per partition through ``mapInArrow`` (the
first step also reads the input files, one file per task); each ``GlobalStage`` is a step of its own:
its ``prepare`` and ``applier`` run as tasks like document stages, its ``decide`` in the Spark form
``pipelines.global_runners`` names, and its ``complete`` once after the tasks.

Every step writes one Parquet dataset holding kept rows and dropped rows (text emptied unless the
config asks for an audit trail). A fused step's tasks each write their own part of it and their
stats, so a rerun after a crash keeps the finished tasks (``pipelines.tasks``). On a cluster, the
model files stages name travel with the job to every executor (``ship_assets``, ``use_shipped_assets``).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from dataprep.core import storage
from dataprep.core.applier import apply_task
from dataprep.core.config import InputConfig
from dataprep.core.errors import UsageError
from dataprep.core.runner import AppliedStage, blank_text, conform, run_fused
from dataprep.core.stage import DocumentStage, GlobalStage, Stage
from dataprep.core.stats import StageStats
from dataprep.readers import READ_STAGE, iter_documents
from pipelines.tasks import read_decisions, read_kept, task_key, write_task

# The columns a global stage's ``prepare`` reads of each document in a pipeline (``GlobalRunner.prepares``)
PREPARE_COLUMNS = ("id", "text")
# Local input files smaller than this share a first-step task (Spark's own maxPartitionBytes default):
# a task costs the executor a Parquet writer, a commit and a stats file however few pages it holds.
TASK_BYTES = 128 << 20


@dataclass
class StepContext:
    spark: Any  # pyspark.sql.SparkSession
    step_dir: str  # this step's output folder (local path or URL); side outputs go below it
    config: Any  # dataprep.core.config.PipelineConfig
    prepared: Any = (
        None  # a global step's per-document rows saved by its tasks (a DataFrame), if its runner prepares any
    )


@dataclass
class Step:
    """One unit of Spark work: either the reader plus fused document stages, or one global stage."""

    index: int
    stages: list[Stage] = field(default_factory=list)
    reads_input: bool = False

    @property
    def is_global(self) -> bool:
        return len(self.stages) == 1 and isinstance(self.stages[0], GlobalStage)

    @property
    def name(self) -> str:
        names = ([READ_STAGE] if self.reads_input else []) + [s.name for s in self.stages]
        label = names[0] if len(names) == 1 else f"{names[0]}-{names[-1]}"
        return f"{self.index:02d}_{label}"

    def fingerprint(self) -> list:
        return [s.name for s in self.stages] + [s.model_dump(mode="json") for s in self.stages]


def plan_steps(stages: list[Stage]) -> list[Step]:
    steps = [Step(0, reads_input=True)]
    for stage in stages:
        if isinstance(stage, GlobalStage):
            steps.append(Step(len(steps), [stage]))
        elif isinstance(stage, DocumentStage):
            if steps[-1].is_global:
                steps.append(Step(len(steps)))
            steps[-1].stages.append(stage)
        else:
            raise TypeError(f"stage {stage.name!r} is neither a DocumentStage nor a GlobalStage")
    return steps


def file_tasks(files: list[str], slots: int) -> list[list[str]]:
    """The first step's tasks, in input order: one per file, except that consecutive small local files
    share one, up to TASK_BYTES or an even share of the input over ``2 * slots`` tasks, whichever is
    less (so every core keeps work). Files on object stores keep a task each: their sizes would cost a
    request each."""
    local = [f for f in files if not storage.is_url(f) and os.path.isfile(f.removeprefix("file://"))]
    if len(local) < len(files) or len(files) <= 2 * slots:
        return [[f] for f in files]
    sizes = [os.path.getsize(f.removeprefix("file://")) for f in files]
    target = min(TASK_BYTES, sum(sizes) / (2 * slots))
    tasks: list[list[str]] = []
    filled = 0
    for path, size in zip(files, sizes):
        if not tasks or filled + size > target:
            tasks.append([])
            filled = 0
        tasks[-1].append(path)
        filled += size
    return tasks


def ship_assets(spark, stages) -> None:
    """On a cluster, send the model files and folders stages name to every executor: their paths
    are the driver's, which executors (other machines, packed environments) may not have."""
    paths = {p for stage in stages for p in stage.asset_paths() if p and os.path.exists(p)}
    if not paths or spark.sparkContext.master.startswith("local"):
        return
    names: dict[str, str] = {}
    for path in sorted(paths):
        name = os.path.basename(os.path.abspath(path))
        if names.setdefault(name, path) != path:
            raise UsageError(
                f"model paths {names[name]!r} and {path!r} share the name {name!r}; executors find shipped files by "
                "name: rename one"
            )
        spark.sparkContext.addFile(os.path.abspath(path), recursive=os.path.isdir(path))


def use_shipped_assets() -> None:
    """Let stages find the files the driver shipped with the job (``SparkContext.addFile``)."""
    from pyspark import SparkFiles

    root = SparkFiles.getRootDirectory()
    if root and root not in storage.ASSET_DIRS:
        storage.ASSET_DIRS.append(root)


def make_partition_fn(
    step: Step,
    stages: list[DocumentStage],
    input_cfg: InputConfig,
    input_dir: str | None,
    input_schema: pa.Schema,
    schema: pa.Schema,
    keep_dropped_text: bool,
    step_dir: str,
    fingerprint: str,
    tasks,
    compression: str,
    progress=None,
    errors=None,
    decisions: str | None = None,
):
    """The function each Spark task runs: its rows are indexes into ``tasks``; for each, read the
    task's inputs (first step: input files; later steps: the kept rows of the previous step's
    Parquet parts, named within ``input_dir``), apply ``stages``, and write the task's rows
    and completion marker (``pipelines.tasks``). ``tasks`` is a broadcast list of input lists: it
    reaches each executor once, not inside every task's function (a listing can be huge).
    A global step's stage is an ``AppliedStage``, run as one task (``dataprep.core.applier.apply_task``)
    with the decision rows of the task's parts (from ``decisions``); what it finishes with goes into the marker.
    ``progress`` (an accumulator) counts documents;
    ``errors`` (one too) gets the task's stats for the error budget while the step runs."""
    stages = list(stages)
    applied = next((s for s in stages if isinstance(s, AppliedStage)), None)

    def run_task(inputs: list[str]) -> None:
        key = task_key(inputs)
        stats = [StageStats(s.name) for s in stages]
        read_stats = StageStats(READ_STAGE)
        dropped_out: list[pa.Table] = []
        finish: dict = {}

        def source_batches():
            for path in inputs:
                if not step.reads_input:
                    yield from read_kept(storage.join_path(input_dir, path), input_schema, input_cfg.batch_size)
                    continue
                for result in iter_documents(path, input_cfg, read_stats):
                    if result.dropped.num_rows:
                        dropped_out.append(result.dropped)
                    yield conform(result.kept, input_schema)

        def fused(batches):
            return run_fused(batches, stages, stats, schema, keep_dropped_text)

        def rows():
            if (
                applied is not None
            ):  # a global step's task: its applier begins with the task's decision rows and finishes once
                task_decisions = read_decisions(decisions, inputs) if decisions else None
                finish.update((yield from apply_task(applied.applier, key, task_decisions, source_batches(), fused)))
                return
            for table in fused(source_batches()):
                while dropped_out:  # reader skips, emitted as they happen
                    yield conform(blank_text(dropped_out.pop(), keep_dropped_text), schema)
                yield table
            while dropped_out:
                yield conform(blank_text(dropped_out.pop(), keep_dropped_text), schema)

        def finished() -> dict:
            return {"stats": [s.to_dict() for s in all_stats], **finish}

        all_stats = ([read_stats] if step.reads_input else []) + stats
        write_task(step_dir, key, inputs, fingerprint, rows(), schema, compression, finished)
        if progress is not None:
            progress.add(all_stats[0].docs_in if all_stats else 0)
        if errors is not None:
            errors.add(all_stats)

    return _task_runner(run_task, tasks)


def make_prepare_fn(
    prepare,
    input_dir: str,
    input_schema: pa.Schema,
    schema: pa.Schema,
    prepared_dir: str,
    fingerprint: str,
    tasks,
    compression: str,
    batch_size: int,
    progress=None,
):
    """The function each Spark task of a global step's prepare phase runs: for each task (an index into
    the broadcast ``tasks``), ``prepare`` (kept documents' PREPARE_COLUMNS -> a table of rows) over its
    parts of the previous step, written with a completion marker (``pipelines.tasks``) that records its
    CPU seconds, so a rerun keeps the rows of every task that finished."""

    input_schema = pa.schema([input_schema.field(c) for c in PREPARE_COLUMNS])  # the rest is not read

    def run_task(inputs: list[str]) -> None:
        cpu0, t0, docs = time.process_time(), time.perf_counter(), [0]

        def rows():
            for path in inputs:
                for table in read_kept(storage.join_path(input_dir, path), input_schema, batch_size):
                    docs[0] += table.num_rows
                    yield prepare(table).cast(schema)

        write_task(
            prepared_dir,
            task_key(inputs),
            inputs,
            fingerprint,
            rows(),
            schema,
            compression,
            lambda: {
                "stats": [],
                "docs": docs[0],
                "cpu_seconds": time.process_time() - cpu0,
                "seconds": time.perf_counter() - t0,
            },
        )
        if progress is not None:
            progress.add(docs[0])

    return _task_runner(run_task, tasks)


def _task_runner(run_task, tasks):
    """The ``mapInArrow`` function of a step's tasks: its rows are indexes into the broadcast ``tasks``."""

    def partition_fn(record_batches):
        use_shipped_assets()
        for rb in record_batches:
            for task in rb.column(0).to_pylist():
                run_task(tasks.value[task])
        yield from ()

    return partition_fn
