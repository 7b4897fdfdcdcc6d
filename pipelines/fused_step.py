"""A fused step of a pipeline run: its tasks, planned against what a previous run finished, run as Spark tasks.

A fused step (consecutive document stages; the first also reads the input files) runs one task per
input file (small local files share one) or, after the first step, per Parquet part of the previous
step. A rerun keeps the tasks a previous run finished with the same fingerprint and runs the rest
(``pipelines.tasks``). The first wave of tasks runs alone when there are more, so a stage failing on
most documents stops the step early (``pipelines.fail_fast``). A global step's applier and prepare
tasks are planned and run the same way (``pipelines.global_step``).
"""

from __future__ import annotations

from dataprep.core.runner import fused_schema
from dataprep.core.stats import StageStats
from dataprep.core.storage import join_path
from dataprep.readers import READ_STAGE, read_schema
from pipelines.fail_fast import ErrorWatch, fail_step
from pipelines.progress import Progress
from pipelines.steps import Step, file_tasks, make_partition_fn
from pipelines.tasks import (
    DATA_DIR,
    merged_stats,
    parquet_parts,
    read_markers,
    remove_others,
    reusable,
    task_key,
    write_empty,
)


def run_fused_step(
    run,
    step: Step,
    step_dir: str,
    files: list[str],
    previous_dir: str | None,
    fingerprint: str,
    stages: list | None = None,
    decisions: str | None = None,
) -> tuple[list[StageStats], dict]:
    """Run the tasks of a fused step of ``run`` (a ``pipelines.pipeline_run.PipelineRun``), or of a global
    step's ``stages``: its applier, that a previous run did not finish (``pipelines.tasks``); return the
    step's stats, summed over all its tasks, and its task counts."""
    from pyspark.sql.pandas.types import to_arrow_schema

    stages = step.stages if stages is None else stages

    if step.reads_input:
        input_dir, inputs, input_schema = None, files, read_schema(run.config.input.format)
    else:  # the previous step's parts, by name: a moved output folder keeps its finished tasks
        input_dir = join_path(previous_dir, DATA_DIR)
        inputs = parquet_parts(input_dir)
        input_schema = to_arrow_schema(run._kept(previous_dir).schema)
    schema = fused_schema(stages, input_schema)
    # One task per input file (small local files share one); later steps: per part of the previous step
    done, todo = plan_tasks(run, step_dir, inputs, fingerprint, by_name=not step.reads_input)
    if done:
        print(f"step {step.name}: reusing {len(done)} finished tasks, running {len(todo)}", flush=True)
    if todo:
        run_tasks(run, step, stages, step_dir, input_dir, todo, input_schema, schema, fingerprint, decisions)
    elif not done:
        write_empty(step_dir, schema, run.config.output.compression)
    names = ([READ_STAGE] if step.reads_input else []) + [s.name for s in stages]
    stats, keys = merged_stats(run.spark, step_dir, names)
    if len(keys) != len(done) + len(todo):
        raise RuntimeError(
            f"step {step.name}: {len(keys)} task markers for {len(done) + len(todo)} tasks; rerun to "
            "redo the missing ones"
        )
    if keys:  # temporary files of tasks killed mid-write
        remove_others(step_dir, keys)
    return stats, {"tasks": len(keys), "tasks_reused": len(done)}


def plan_tasks(
    run, task_dir: str, inputs: list[str], fingerprint: str, by_name: bool
) -> tuple[dict[str, dict], list[list[str]]]:
    """The tasks in ``task_dir`` a rerun keeps (``pipelines.tasks.reusable``; everything else there is
    deleted) and the inputs they do not cover, grouped into tasks (``file_tasks``); ``by_name``: inputs
    are named by their file name (parts of the previous step, so a moved output keeps its tasks)."""
    name = (lambda path: path.rsplit("/", 1)[-1]) if by_name else (lambda path: path)
    done = (
        {}
        if run.force
        else reusable(read_markers(run.spark, task_dir), fingerprint, [name(p) for p in inputs], task_dir)
    )
    remove_others(task_dir, done)
    covered = {path for marker in done.values() for path in marker["inputs"]}
    groups = file_tasks([p for p in inputs if name(p) not in covered], run.spark.sparkContext.defaultParallelism)
    return done, [[name(p) for p in group] for group in groups]


def run_tasks(
    run,
    step: Step,
    stages: list,
    step_dir: str,
    input_dir: str | None,
    todo: list[list[str]],
    input_schema,
    schema,
    fingerprint: str,
    decisions: str | None,
) -> None:
    """Run ``todo`` as Spark tasks, one row each of a ``spark.range`` (made in the JVM: a DataFrame
    built from a Python RDD would start a second Python worker per task just to convert its rows).
    The first wave (a task per core) runs alone when there are more, so a stage failing on most
    documents stops the step after one task's time; later ones are watched as they finish."""
    spark, config = run.spark, run.config
    context = spark.sparkContext
    slots = context.defaultParallelism
    single = all(len(task) == 1 for task in todo) and step.reads_input
    group = f"dataprep-{step.name}-{fingerprint}"
    waves = [(0, slots), (slots, len(todo))] if len(todo) > slots else [(0, len(todo))]
    with (
        Progress(spark, step.name, unit="files" if single else "tasks", total=len(todo)) as progress,
        ErrorWatch(spark, config.error_budget, group) as watch,
    ):
        fn = make_partition_fn(
            step,
            stages,
            config.input,
            input_dir,
            input_schema,
            schema,
            config.output.write_dropped,
            step_dir,
            fingerprint,
            context.broadcast(todo),
            config.output.compression,
            progress.docs,
            watch.stats,
            decisions,
        )
        context.setJobGroup(group, f"dataprep step {step.name}", interruptOnCancel=True)
        try:
            for start, end in waves:
                try:
                    tasks = spark.range(start, end, 1, end - start).mapInArrow(fn, "task long")
                    tasks.write.format("noop").mode("overwrite").save()
                except Exception:
                    if not watch.failed:
                        raise
                if watch.failed or (end < len(todo) and watch.check()):  # the last wave: the exact check decides
                    keys = {task_key(task) for task in todo}
                    ran = sum(marker.get("key") in keys for marker in read_markers(spark, step_dir))
                    fail_step(
                        spark,
                        step.name,
                        step_dir,
                        watch.failed,
                        config.error_budget,
                        f"stopped early with {ran} of {len(todo)} tasks done: ",
                    )
        finally:
            context.setLocalProperty("spark.jobGroup.id", None)
    progress.finish()
