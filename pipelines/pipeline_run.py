"""One run of a pipeline config: plan the steps, run or skip each, gather stats, write the corpus.

Each step writes Parquet under ``OUTPUT/steps/NN_name/`` and then a ``_STEP_DONE.json`` marker holding
its stats and a fingerprint of the config that produced it. A rerun skips every step whose marker
matches and redoes the first one that does not (a crash leaves no marker), so a killed job resumes
without losing or duplicating documents. The cleaned corpus lands in ``OUTPUT/corpus/``.

A step whose stage errors exceed the config's ``error_budget`` fails: no marker, its first tracebacks
printed and saved to ``steps/NN_name/_ERRORS.json``; rerunning after the fix resumes at that step.
Model files a stage names are shipped with the job to cluster executors (``addFile``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import time
from dataclasses import dataclass

from dataprep.core.config import PipelineConfig
from dataprep.core.storage import atomic_write_text, exists, expand_inputs, is_url, join_path, read_text
from dataprep.readers import READ_SCHEMA, READ_STAGE
from dataprep.core.runner import fused_schema
from dataprep.core.stage import DROP_REASON, DROP_STAGE
from dataprep.core.stats import ErrorBudgetExceeded, StageStats, describe_errors, format_table, merge_all, over_budget, save_json
from pipelines.progress import Progress
from pipelines.steps import STATS_DIR, Step, StepContext, file_tasks, make_partition_fn, plan_steps

log = logging.getLogger("ccpretrain")
DONE_MARKER = "_STEP_DONE.json"
ERRORS_FILE = "_ERRORS.json"


@dataclass
class RunResult:
    output_dir: str
    corpus_dir: str
    stats: list[StageStats]
    files: int
    skipped_steps: int


def _fingerprint(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _read_marker(path: str) -> dict | None:
    try:
        return json.loads(read_text(path)) if exists(path) else None
    except (OSError, ValueError):
        return None


class PipelineRun:
    """One execution of a config: plans the steps, runs or skips each, gathers stats."""

    def __init__(self, config: PipelineConfig, spark=None, force: bool = False):
        self.config = config
        self.out = config.output.dir
        self.force = force
        self._spark = spark
        self.steps = plan_steps(config.stages)

    @property
    def spark(self):
        if self._spark is None:
            from pipelines.spark import get_spark

            sc = self.config.spark
            self._spark = get_spark(sc.master, sc.app_name, sc.conf)
            context = self._spark.sparkContext
            if not context.master.startswith("local") and not context.getCheckpointDir():
                # dedup checkpoints its graphs; on executors' local disks a lost executor would fail the step
                context.setCheckpointDir(join_path(self.out, "_checkpoints"))
        return self._spark

    def run(self) -> RunResult:
        cfg = self.config
        files = expand_inputs(cfg.input.paths) if cfg.input.paths else []
        if not cfg.input.paths:
            raise ValueError("no input: set input.paths in the config or pass --input")
        if not files:
            log.warning("input matched no files; writing an empty corpus")
        print(f"dataprep: {len(files)} input files, {len(self.steps)} steps -> {self.out}", flush=True)
        self._ship_assets()
        fingerprint = _fingerprint({"files": files, "input": cfg.input.model_dump(mode="json")})
        all_stats: list[StageStats] = []
        skipped = 0
        previous_dir = None
        redo = self.force
        for step in self.steps:
            fingerprint = _fingerprint([fingerprint, step.fingerprint()])
            step_dir = join_path(self.out, "steps", step.name)
            marker = None if redo else _read_marker(join_path(step_dir, DONE_MARKER))
            if marker and marker.get("fingerprint") == fingerprint:
                print(f"step {step.name}: already done, skipping", flush=True)
                skipped += 1
                stats = [StageStats.from_dict(d) for d in marker["stats"]]
            else:
                redo = True  # everything after a redone step is redone too
                print(f"step {step.name}: running", flush=True)
                t0 = time.perf_counter()
                stats = self._run_step(step, step_dir, files, previous_dir)
                wall = time.perf_counter() - t0
                self._check_errors(step, step_dir, stats)
                if step.reads_input:
                    self._warn_empty(stats)
                atomic_write_text(
                    join_path(step_dir, DONE_MARKER),
                    json.dumps({"fingerprint": fingerprint, "wall_seconds": wall, "stats": [s.to_dict() for s in stats]}, indent=1),
                )
                print(f"step {step.name}: done in {wall:.1f}s", flush=True)
            all_stats.extend(stats)
            previous_dir = step_dir
        corpus_dir = join_path(self.out, "corpus")
        self._write_corpus(previous_dir, corpus_dir, fingerprint, redo)
        all_stats = merge_all(all_stats)
        save_json(all_stats, join_path(self.out, "stats.json"),
                  {"input_files": len(files), "cores": self.spark.sparkContext.defaultParallelism, "corpus": corpus_dir})
        print(format_table(all_stats), flush=True)
        print(f"cleaned corpus: {corpus_dir}\nstats: {join_path(self.out, 'stats.json')}", flush=True)
        return RunResult(self.out, corpus_dir, all_stats, len(files), skipped)

    # -- checks --------------------------------------------------------------------------------

    def _check_errors(self, step: Step, step_dir: str, stats: list[StageStats]) -> None:
        """Fail the step (no marker) when a stage's errors exceed the budget; save what went wrong."""
        budget = self.config.error_budget
        failed = over_budget(stats, budget.max_fraction, budget.min_errors)
        if not failed:
            return
        report = describe_errors(failed, budget.max_fraction, budget.min_errors)
        path = join_path(step_dir, ERRORS_FILE)
        atomic_write_text(path, json.dumps({"stages": [s.to_dict() for s in failed]}, indent=1, ensure_ascii=False))
        print(f"step {step.name}: FAILED, errors over budget\n{report}\nall error samples: {path}", file=sys.stderr, flush=True)
        raise ErrorBudgetExceeded(
            f"step {step.name} failed: {', '.join(f'{s.stage} ({s.errors} of {s.docs_in} documents)' for s in failed)} "
            f"raised errors past the error budget; see {path}. Fix the cause and rerun: finished steps are kept."
        )

    @staticmethod
    def _warn_empty(stats: list[StageStats]) -> None:
        read = next((s for s in stats if s.stage == READ_STAGE), None)
        if read is None:
            return
        if read.counters.get("empty_files"):
            log.warning("%d input files are empty", read.counters["empty_files"])
        if read.docs_kept == 0:
            log.warning("the input holds no documents (%d records read, all dropped): check input.paths and input.format", read.docs_in)

    def _ship_assets(self) -> None:
        """On a cluster, send the model files and folders stages name to every executor: their paths
        are the driver's, which executors (other machines, packed environments) may not have."""
        paths = {p for stage in self.config.stages for p in stage.asset_paths() if p and os.path.exists(p)}
        if not paths or self.spark.sparkContext.master.startswith("local"):
            return
        names: dict[str, str] = {}
        for path in sorted(paths):
            name = os.path.basename(os.path.abspath(path))
            if names.setdefault(name, path) != path:
                raise ValueError(f"model paths {names[name]!r} and {path!r} share the name {name!r}; executors find shipped files by name: rename one")
            self.spark.sparkContext.addFile(os.path.abspath(path), recursive=os.path.isdir(path))

    # -- steps ---------------------------------------------------------------------------------

    def _kept(self, step_dir: str):
        from pyspark.sql import functions as F

        df = self.spark.read.parquet(join_path(step_dir, "data"))
        return df.where(F.col(DROP_REASON).isNull()).drop(DROP_STAGE, DROP_REASON)

    def _run_step(self, step: Step, step_dir: str, files: list[str], previous_dir: str | None) -> list[StageStats]:
        if step.is_global:
            return self._run_global(step, step_dir, previous_dir)
        return self._run_fused(step, step_dir, files, previous_dir)

    def _write(self, df, path: str) -> None:
        compression = self.config.output.compression
        df.write.mode("overwrite").option("compression", "none" if compression == "none" else compression).parquet(path)

    def _run_fused(self, step: Step, step_dir: str, files: list[str], previous_dir: str | None) -> list[StageStats]:
        from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

        spark = self.spark
        if step.reads_input:
            input_schema = READ_SCHEMA
            # One task per input file (small local files share one): the executor opens and streams them.
            # The tasks' rows are indexes from spark.range, made in the JVM: a DataFrame built from a
            # Python RDD would start a second Python worker per task just to convert its rows.
            file_groups = file_tasks(files, spark.sparkContext.defaultParallelism)
            source = spark.range(0, len(file_groups), 1, max(1, len(file_groups)))
            unit, total = ("files", len(files)) if len(file_groups) == len(files) else ("tasks", len(file_groups))
        else:
            source = self._kept(previous_dir)
            input_schema = to_arrow_schema(source.schema)
            unit, total, file_groups = "partitions", None, None
        schema = fused_schema(step.stages, input_schema)
        _remove_tree(join_path(step_dir, STATS_DIR))  # a crashed run's files would be counted again
        with Progress(spark, step.name, unit=unit, total=total) as progress:
            # the task list reaches each executor once (a broadcast), not inside every task's function
            groups = spark.sparkContext.broadcast(file_groups) if file_groups is not None else None
            fn = make_partition_fn(step, self.config.input, schema, self.config.output.write_dropped, step_dir, progress.docs, groups)
            self._write(source.mapInArrow(fn, from_arrow_schema(schema)), join_path(step_dir, "data"))
        progress.finish()
        return self._collect_stats(step_dir)

    def _collect_stats(self, step_dir: str) -> list[StageStats]:
        """Merge the per-partition stats files the tasks wrote: read here when they are on this machine's
        disk (a Spark job would cost more than the reading), by Spark on object stores (there may be
        many, and Spark reads them in parallel)."""
        stats_dir = join_path(step_dir, STATS_DIR)
        if not exists(stats_dir):
            return []
        if is_url(stats_dir):
            texts = (row.value for row in self.spark.read.text(stats_dir).toLocalIterator())
        else:
            local = stats_dir.removeprefix("file://")
            texts = (_read_local(os.path.join(local, name)) for name in sorted(os.listdir(local)) if not name.startswith((".", "_")))
        # merged as they are read: the driver holds one task's stats at a time, however many tasks ran
        return merge_all(StageStats.from_dict(d) for text in texts for d in json.loads(text))

    def _run_global(self, step: Step, step_dir: str, previous_dir: str) -> list[StageStats]:
        from pyspark.sql import functions as F

        from pipelines.global_runners import global_runner

        stage = step.stages[0]
        run_fn = global_runner(stage)
        ctx = StepContext(spark=self.spark, step_dir=step_dir, config=self.config)
        t0 = time.perf_counter()
        df = run_fn(self._kept(previous_dir), stage, ctx)
        dropped = F.col(DROP_REASON).isNotNull()
        size = F.coalesce(F.octet_length("text"), F.lit(0))
        df = df.withColumn("_bytes", size)
        if not self.config.output.write_dropped:
            df = df.withColumn("text", F.when(dropped, F.lit(None).cast("string")).otherwise(F.col("text")))
        with Progress(self.spark, step.name, unit="tasks") as progress:
            self._write(df, join_path(step_dir, "data"))
        self.spark.catalog.clearCache()  # runners may cache their result to avoid recomputing it for the write
        seconds = time.perf_counter() - t0
        counts = (
            self.spark.read.parquet(join_path(step_dir, "data"))
            .groupBy(DROP_REASON)
            .agg(F.count("*").alias("docs"), F.sum("_bytes").alias("bytes"))
            .collect()
        )
        stats = StageStats(stage.name, seconds=seconds)
        stats.record_counters(stage)  # counts the runner recorded on the driver
        for row in counts:
            stats.docs_in += row.docs
            stats.bytes_in += row.bytes or 0
            if row[DROP_REASON] is None:
                stats.docs_kept += row.docs
                stats.bytes_kept += row.bytes or 0
            else:
                stats.dropped[row[DROP_REASON]] += row.docs
                stats.dropped_bytes[row[DROP_REASON]] += row.bytes or 0
        progress.finish(stats.docs_in)
        return [stats]

    def _write_corpus(self, last_dir: str, corpus_dir: str, fingerprint: str, redo: bool) -> None:
        marker = join_path(corpus_dir, DONE_MARKER)
        done = _read_marker(marker)
        if not redo and done and done.get("fingerprint") == fingerprint:
            return
        df = self._kept(last_dir)
        df = df.drop(*[c for c in ("_bytes", "html") if c in df.columns])
        self._write(df, corpus_dir)
        atomic_write_text(marker, json.dumps({"fingerprint": fingerprint}))


def run_pipeline(config: PipelineConfig, spark=None, force: bool = False) -> RunResult:
    return PipelineRun(config, spark=spark, force=force).run()


def _read_local(path: str) -> str:
    """A local file's text, without fsspec's per-call cost (one stats file per task adds up)."""
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def _remove_tree(path: str) -> None:
    import fsspec

    fs, _, (local,) = fsspec.get_fs_token_paths(path)
    if fs.exists(local):
        fs.rm(local, recursive=True)

