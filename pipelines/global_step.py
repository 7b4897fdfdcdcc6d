"""A global (whole-corpus) step of a pipeline run: prepare, decide once, then apply in tasks.

The stage's ``prepare`` runs as tasks over the previous step's parts, each saving its rows under
``_prepared/`` with a marker, so a run that dies while deciding keeps the tasks that finished. The
decision (the Spark form ``pipelines.global_runners`` names) is saved as ``_DECIDED.json`` and its rows
under ``_decisions/``, split by the part of the previous step holding each document; a rerun with the
same config over the same parts reuses it. The stage's applier then runs on each part as the tasks of
a fused step do (``pipelines.fused_step``), and a rerun keeps those that finished with this decision.
"""

from __future__ import annotations

import json
import time
import uuid

from dataprep.core.runner import AppliedStage
from dataprep.core.stats import StageStats
from dataprep.core.storage import atomic_write_text, join_path, remove_tree
from pipelines.fused_step import plan_tasks
from pipelines.progress import Progress, executor_fixed_cpu_seconds, executor_seconds, python_cpu
from pipelines.steps import Step, StepContext, make_prepare_fn
from pipelines.tasks import DATA_DIR, PART, parquet_parts, read_marker, read_markers, task_key

DECIDED_MARKER = "_DECIDED.json"  # a global step's decision over the whole corpus, made
DECISIONS_DIR = "_decisions"  # its decision rows, split by part of the previous step
PREPARED_DIR = "_prepared"  # the per-document rows its decision starts from (MinHash signatures), per task


def run_global_step(
    run, step: Step, step_dir: str, previous_dir: str, fingerprint: str
) -> tuple[list[StageStats], dict]:
    """A global step of ``run`` (a ``pipelines.pipeline_run.PipelineRun``): its decision over the whole
    corpus (kept from a previous run that made it with this config), then its applier run on each part
    of the previous step as tasks, which a rerun keeps as it keeps a fused step's."""
    from pipelines.global_runners import completes, global_runner

    stage = step.stages[0]
    ctx = StepContext(spark=run.spark, step_dir=step_dir, config=run.config)
    decided = decide(run, step, step_dir, previous_dir, fingerprint, global_runner(stage), ctx)
    remove_tree(join_path(step_dir, PREPARED_DIR))  # the decision holds what the tasks need of it
    applied = AppliedStage(applier=stage.applier(decided["state"]))
    decisions = join_path(step_dir, DECISIONS_DIR) if decided["rows"] else None
    stats, tasks = run._run_fused(
        step, step_dir, [], previous_dir, f"{fingerprint}-{decided['run']}", [applied], decisions
    )
    if completes(stage):
        stage.complete(decided["state"], read_markers(run.spark, step_dir))
    stats[0].merge(StageStats.from_dict(decided["stats"]))
    return stats, tasks


def decide(run, step: Step, step_dir: str, previous_dir: str, fingerprint: str, runner, ctx) -> dict:
    """The global step's decision: reused when a previous run saved one with this fingerprint over
    the same parts of the previous step, else made now and saved (``_DECIDED.json``: its stats, its
    state, and a run id that the tasks' markers carry, so tasks applying another decision are never
    kept), its rows split by the part of the previous step holding each document."""
    from pyspark.sql import functions as F

    from pipelines.decisions.shared import BROADCAST_ROWS

    spark = run.spark
    path = join_path(step_dir, DECIDED_MARKER)
    parts_key = task_key([p.rsplit("/", 1)[-1] for p in parquet_parts(join_path(previous_dir, DATA_DIR))])
    saved = None if run.force else read_marker(path)
    if saved and saved.get("fingerprint") == fingerprint and saved.get("parts") == parts_key:
        print(f"step {step.name}: reusing the decision a previous run made", flush=True)
        return saved
    stage = step.stages[0]
    context = spark.sparkContext
    t0 = time.perf_counter()
    prepared_cpu = prepared_seconds = 0.0
    if runner.prepares:
        ctx.prepared, prepared_cpu, prepared_seconds = run._prepare(
            step, step_dir, previous_dir, fingerprint, (stage.prepare, stage.prepared_schema)
        )
    group = f"dataprep-{step.name}-{uuid.uuid4().hex}"
    context.setJobGroup(group, f"dataprep step {step.name}: decide", interruptOnCancel=True)
    try:
        kept = run._kept(previous_dir)
        with (
            python_cpu(spark) as worker_cpu,
            Progress(spark, f"{step.name} decide", unit="Spark tasks", counts_docs=False) as progress,
        ):
            rows, state = runner.decide(kept, stage, ctx)
            if rows is not None:  # few rows (the documents concerned) beside every document's part
                parts = kept.select("id", F.element_at(F.split(F.input_file_name(), "/"), -1).alias(PART))
                rows = parts.join(F.broadcast(rows) if rows.count() <= BROADCAST_ROWS else rows, "id")
                # grouped by part first: a writer task per part, not a file per part in every task
                rows.repartition(PART).write.mode("overwrite").partitionBy(PART).parquet(
                    join_path(step_dir, DECISIONS_DIR)
                )
        spark.catalog.clearCache()  # runners may cache what they computed
        stats = StageStats(stage.name, seconds=time.perf_counter() - t0)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    stats.executor_seconds, jvm_cpu = executor_seconds(spark, group)
    stats.executor_seconds += prepared_seconds  # the prepare tasks', reused ones included
    stats.executor_cpu_seconds = jvm_cpu + worker_cpu.value + prepared_cpu
    stats.executor_fixed_cpu_seconds = executor_fixed_cpu_seconds(spark, group) + worker_cpu.fixed
    stats.record_counters(stage)  # counts the runner recorded on the driver
    progress.finish()
    decided = {
        "fingerprint": fingerprint,
        "parts": parts_key,
        "run": uuid.uuid4().hex[:12],
        "state": state,
        "rows": rows is not None,
        "stats": stats.to_dict(),
    }
    atomic_write_text(path, json.dumps(decided, indent=1))
    return decided


def prepare(run, step: Step, step_dir: str, previous_dir: str, fingerprint: str, prepare_fn) -> tuple:
    """Run the per-document part of a decision (``prepare_fn``: the stage's ``prepare`` and its schema)
    as tasks over the previous step's parts, keeping those a previous run finished with this config
    (``pipelines.tasks``); return the rows as a DataFrame, and the CPU and task seconds of all tasks."""
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    fn, schema = prepare_fn
    spark, config = run.spark, run.config
    prepared_dir = join_path(step_dir, PREPARED_DIR)
    input_dir = join_path(previous_dir, DATA_DIR)
    done, todo = plan_tasks(run, prepared_dir, parquet_parts(input_dir), fingerprint, by_name=True)
    context = spark.sparkContext
    if done:
        print(f"step {step.name}: reusing {len(done)} prepared tasks, running {len(todo)}", flush=True)
    if todo:
        context.setJobGroup(
            f"dataprep-{step.name}-prepare", f"dataprep step {step.name}: prepare", interruptOnCancel=True
        )
        try:
            with Progress(spark, f"{step.name} prepare", total=len(todo)) as progress:
                fn = make_prepare_fn(
                    fn,
                    input_dir,
                    to_arrow_schema(run._kept(previous_dir).schema),
                    schema,
                    prepared_dir,
                    fingerprint,
                    context.broadcast(todo),
                    config.output.compression,
                    config.input.batch_size,
                    progress.docs,
                )
                spark.range(0, len(todo), 1, len(todo)).mapInArrow(fn, "task long").write.format("noop").mode(
                    "overwrite"
                ).save()
        finally:
            context.setLocalProperty("spark.jobGroup.id", None)
        progress.finish()
    markers = [m for m in read_markers(spark, prepared_dir) if m.get("fingerprint") == fingerprint]
    if len(markers) != len(done) + len(todo):
        raise RuntimeError(
            f"step {step.name}: {len(markers)} prepared task markers for {len(done) + len(todo)} tasks; "
            "rerun to redo the missing ones"
        )
    rows = spark.read.schema(from_arrow_schema(schema)).parquet(join_path(prepared_dir, DATA_DIR))
    return rows, sum(m["cpu_seconds"] for m in markers), sum(m["seconds"] for m in markers)
