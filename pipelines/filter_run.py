"""``dataprep filter SIGNALS_OUT --config CONFIG``: a full run's output from a signals run's columns.

The run has a full run's steps, tasks and part names, so its corpus, stats and token shards are the full
run's: its first step reads each task's signals part instead of the input files (the reader's counts
come from the signals run's task markers), and each document stage takes its stored verdict, or decides
again from its stored values (``dataprep.core.signals.ReplayStage``). A whole-corpus stage decides among
the documents still kept, as in a full run, from stored values: a dedup stage from the stored hashes or
signatures, top_fraction from the stored scores. Nothing reads the input files or computes a signal again.
``--where`` expressions (Spark SQL over the signal columns) drop what they do not hold for, before the
first whole-corpus stage.
"""

from __future__ import annotations

import json

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dataprep.core import storage
from dataprep.core.config import ConfigError, PipelineConfig
from dataprep.core.runner import blank_text, conform, fused_schema, run_fused
from dataprep.core.signals import ReplayStage, WhereStage, is_signal_column, replay_plan, unstored_columns
from dataprep.core.stage import DROP_REASON, DROP_STAGE, GlobalStage
from dataprep.core.stats import StageStats
from dataprep.core.storage import join_path, read_text
from dataprep.readers import READ_STAGE
from pipelines.pipeline_run import PipelineRun, RunResult
from pipelines.signals_run import MANIFEST, SIGNALS_DIR, stored_prepared
from pipelines.steps import plan_steps, use_shipped_assets
from pipelines.tasks import (
    DATA_DIR,
    DONE_MARKER,
    PART,
    merged_stats,
    read_decisions,
    read_marker,
    read_markers,
    remove_others,
    reusable,
    task_key,
    write_task,
)

WHERE_DIR = "_where"  # the ids each --where drops, split by signals part


class FilterRun(PipelineRun):
    """A config's run over stored signals instead of its input files."""

    def __init__(
        self,
        signals_out: str,
        config: PipelineConfig,
        where: list[str] | None = None,
        spark=None,
        force: bool = False,
        overwrite: bool = False,
    ):
        self.signals_dir = join_path(signals_out, SIGNALS_DIR)
        marker = read_marker(join_path(self.signals_dir, DONE_MARKER))
        manifest_path = join_path(self.signals_dir, MANIFEST)
        if marker is None or not storage.exists(manifest_path):
            raise ConfigError(
                f"{signals_out} holds no finished signals run (run `dataprep run CONFIG --signals --output "
                f"{signals_out}` first)"
            )
        self.manifest = json.loads(read_text(manifest_path))
        stages, problems = replay_plan(self.manifest["stages"], config.stages)
        if problems:
            raise ConfigError("cannot filter these signals with this config:\n  " + "\n  ".join(problems))
        config = config.model_copy(update={"input": type(config.input).model_validate(self.manifest["input"])})
        super().__init__(config, spark=spark, force=force, overwrite=overwrite)
        self.where = list(where or [])
        if self.where:  # before the first whole-corpus stage
            first_global = next((i for i, s in enumerate(stages) if isinstance(s, GlobalStage)), len(stages))
            stages.insert(first_global, WhereStage(expressions=self.where))
        self.steps = plan_steps(stages)
        self.positions = {id(s): i for i, s in enumerate(config.stages)}

    def _input_files(self) -> list[str]:
        return list(self.manifest["files"])

    @staticmethod
    def _corpus_frame(df):
        return PipelineRun._corpus_frame(df.drop(*[c for c in df.columns if is_signal_column(c)]))

    def _prepare(self, step, step_dir, previous_dir, fingerprint, prepare):
        """A dedup stage's per-document rows: the stored ones of the documents still kept."""
        stage = step.stages[0]
        return stored_prepared(self._kept(previous_dir), stage, self.positions[id(stage)]), 0.0, 0.0

    def _run_fused(self, step, step_dir, files, previous_dir, fingerprint, stages=None, decisions=None):
        if not step.reads_input:
            return super()._run_fused(step, step_dir, files, previous_dir, fingerprint, stages, decisions)
        stages = step.stages
        data_dir = join_path(self.signals_dir, DATA_DIR)
        tasks = [
            (m["inputs"], next(s for s in m["stats"] if s["stage"] == READ_STAGE))
            for m in read_markers(self.spark, self.signals_dir)
            if m.get("fingerprint") == self.manifest["fingerprint"]
        ]
        if not tasks:
            raise ConfigError(f"{self.signals_dir} holds no task of its signals run")
        with fsspec.open(join_path(data_dir, f"part-{task_key(tasks[0][0])}.parquet"), "rb") as fh:
            signals = pq.read_schema(fh)
        if problems := unstored_columns(stages, signals):
            raise ConfigError("cannot filter these signals with this config:\n  " + "\n  ".join(problems))
        # a column a later step's stage sets joins the rows there, so the corpus's columns come in a full run's order
        later = {
            f.name
            for later_step in self.steps[1:]
            for stage in later_step.stages
            if isinstance(stage, ReplayStage)
            for f in stage.stage.output_fields()
        }
        input_schema = pa.schema([f for f in signals if f.name not in (DROP_STAGE, DROP_REASON, *later)])
        schema = fused_schema(stages, input_schema)
        where_dir = self._where_rows(step_dir) if self.where else None
        done = (
            {}
            if self.force
            else reusable(read_markers(self.spark, step_dir), fingerprint, [p for t in tasks for p in t[0]], step_dir)
        )
        remove_others(step_dir, done)
        todo = [t for t in tasks if task_key(t[0]) not in done]
        if done:
            print(f"step {step.name}: reusing {len(done)} finished tasks, running {len(todo)}", flush=True)
        if todo:
            fn = _filter_fn(
                stages,
                data_dir,
                where_dir,
                input_schema,
                schema,
                self.config.output.write_dropped,
                step_dir,
                fingerprint,
                self.spark.sparkContext.broadcast(todo),
                self.config.output.compression,
                self.config.input.batch_size,
            )
            self.spark.range(0, len(todo), 1, len(todo)).mapInArrow(fn, "task long").write.format("noop").mode(
                "overwrite"
            ).save()
        stats, keys = merged_stats(self.spark, step_dir, [READ_STAGE] + [s.name for s in stages])
        return stats, {"tasks": len(keys), "tasks_reused": len(done)}

    def _where_rows(self, step_dir: str) -> str:
        """The ids each --where expression does not hold for (null counts as not), split by signals part."""
        from pyspark.sql import functions as F

        folder = join_path(step_dir, WHERE_DIR)
        df = self.spark.read.parquet(join_path(self.signals_dir, DATA_DIR)).where(F.col(DROP_REASON).isNull())
        holds = F.lit(True)
        for expression in self.where:
            try:
                holds = holds & F.coalesce(F.expr(expression).cast("boolean"), F.lit(False))
                df.select(F.expr(expression)).schema  # noqa: B018 - names a missing column now, not in a task
            except Exception as exc:  # noqa: BLE001 - Spark's analysis errors have no common public base
                raise ConfigError(f"--where {expression!r}: {str(exc).splitlines()[0]}") from None
        part = F.element_at(F.split(F.input_file_name(), "/"), -1).alias(PART)
        df.where(~holds).select("id", part).repartition(PART).write.mode("overwrite").partitionBy(PART).parquet(folder)
        return folder


def _filter_fn(
    stages,
    data_dir,
    where_dir,
    input_schema,
    schema,
    keep_dropped_text,
    step_dir,
    fingerprint,
    tasks,
    compression,
    batch_size,
):
    """The function of a filter's first-step tasks: each reads its signals part (named by its input
    files, as the full run's task is), passes the reader's drops on, runs the replayed stages over
    the rest, and writes its rows and marker under the full run's task name."""

    def run_task(inputs: list[str], read: dict) -> None:
        key = task_key(inputs)
        part = f"part-{key}.parquet"
        for stage in stages:
            if isinstance(stage, WhereStage):
                rows = read_decisions(where_dir, [part]) if where_dir else None
                stage.failing = set(rows.column("id").to_pylist()) if rows is not None else set()
        stats = [StageStats(s.name) for s in stages]
        dropped_out: list[pa.Table] = []

        def source_batches():
            with fsspec.open(join_path(data_dir, part), "rb") as fh:
                for batch in pq.ParquetFile(fh).iter_batches(batch_size=batch_size):
                    table = pa.Table.from_batches([batch])
                    dead = pc.is_valid(table.column(DROP_REASON))
                    if pc.any(dead).as_py():
                        dropped_out.append(table.filter(dead))
                    yield conform(table.filter(pc.invert(dead)), input_schema)

        def rows():
            for table in run_fused(source_batches(), stages, stats, schema, keep_dropped_text):
                while dropped_out:
                    yield conform(blank_text(dropped_out.pop(), keep_dropped_text), schema)
                yield table
            while dropped_out:
                yield conform(blank_text(dropped_out.pop(), keep_dropped_text), schema)

        write_task(
            step_dir,
            key,
            inputs,
            fingerprint,
            rows(),
            schema,
            compression,
            lambda: {"stats": [read] + [s.to_dict() for s in stats]},
        )

    def partition_fn(record_batches):
        use_shipped_assets()
        for rb in record_batches:
            for task in rb.column(0).to_pylist():
                run_task(*tasks.value[task])
        yield from ()

    return partition_fn


def run_filter(
    signals_out: str,
    config: PipelineConfig,
    where: list[str] | None = None,
    spark=None,
    force: bool = False,
    overwrite: bool = False,
) -> RunResult:
    return FilterRun(signals_out, config, where, spark=spark, force=force, overwrite=overwrite).run()
