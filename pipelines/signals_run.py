"""``dataprep run CONFIG --signals``: every stage's values and would-be verdicts for every document, in
``OUT/signals/data`` (Parquet; the columns: ``dataprep.core.signals``, docs/stages.md).

One step reads the input and runs every document stage annotating (and stores each dedup stage's
hashes or signatures), as a full run's first step does, with the same tasks and part names, so that
``dataprep filter`` can rebuild each step of a full run part by part. Then each whole-corpus stage
decides over every document (a dedup stage: cluster, its size, and whether this copy would be kept;
top_fraction: the score and its rank), and each part gets those columns. Tokenize is left to filter.
"""

from __future__ import annotations

import json
import time

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dataprep.core import storage
from dataprep.core.applier import apply_task, run_task
from dataprep.core.config import ConfigError
from dataprep.core.signals import PREPARED_SETTINGS, REASON, SIGNAL_GLOBALS, prefix, signal_stages, signals_problems
from dataprep.core.stage import DROP_REASON, GlobalStage, with_column
from dataprep.core.stats import format_table, merge_all, save_json
from dataprep.core.storage import atomic_write_text, join_path
from dataprep.quality.top_fraction import TopFraction
from pipelines.fail_fast import check_budget
from pipelines.pipeline_run import PipelineRun, RunResult, check_input_read
from pipelines.run_folder import claim_output
from pipelines.steps import Step, ship_assets
from pipelines.tasks import (
    DATA_DIR,
    DONE_MARKER,
    PART,
    fingerprint_of,
    parquet_parts,
    read_decisions,
    read_marker,
    write_step_marker,
)

SIGNALS_DIR = "signals"
MANIFEST = "_SIGNALS.json"  # what filter needs: the stages and settings that made the signals
GLOBAL_DIR = "_global"  # each whole-corpus stage's decision rows, split by part
RANK = "rank"


class SignalsRun(PipelineRun):
    """A signals run of a config: one annotating step, then the whole-corpus signals."""

    def __init__(self, config, spark=None, force: bool = False, overwrite: bool = False):
        problems = signals_problems(config.stages)
        if problems:
            raise ConfigError("cannot run in signals mode:\n  " + "\n  ".join(problems))
        super().__init__(config, spark=spark, force=force, overwrite=overwrite)
        self.steps = [Step(0, signal_stages(config.stages), reads_input=True)]
        self.globals = [
            (i, s) for i, s in enumerate(config.stages) if isinstance(s, GlobalStage) and s.name in SIGNAL_GLOBALS
        ]

    def run(self) -> RunResult:
        files = self._input_files()
        claim_output(self.config, self.steps, files, self.overwrite)
        signals_dir = join_path(self.out, SIGNALS_DIR)
        step = self.steps[0]
        print(
            f"dataprep: {len(files)} input files, signals of {len(self.config.stages)} stages -> {signals_dir}",
            flush=True,
        )
        ship_assets(self.spark, self.config.stages)
        fingerprint = fingerprint_of(
            [
                {"files": files, "input": self.config.input.model_dump(mode="json")},
                step.fingerprint(),
                [s.model_dump(mode="json") for _, s in self.globals],
            ]
        )
        done = None if self.force else read_marker(join_path(signals_dir, DONE_MARKER))
        if done and done.get("fingerprint") == fingerprint:
            print("signals: already done, skipping", flush=True)
            stats = merge_all(_stats_of(done))
            return RunResult(self.out, signals_dir, stats, len(files), 1, [{"step": SIGNALS_DIR, "skipped": True}])
        t0 = time.perf_counter()
        stats, tasks = self._run_fused(step, signals_dir, files, None, fingerprint)
        check_input_read(stats, len(files))
        check_budget(self.spark, step.name, signals_dir, stats, self.config.error_budget)
        states = [self._decide_over_all(signals_dir, position, stage) for position, stage in self.globals]
        self._annotate_parts(signals_dir, states)
        stats = merge_all(stats)
        manifest = {
            "files": files,
            "input": self.config.input.model_dump(mode="json"),
            "fingerprint": fingerprint,
            "stages": [{"name": s.name, "params": s.model_dump(mode="json")} for s in self.config.stages],
        }
        atomic_write_text(join_path(signals_dir, MANIFEST), json.dumps(manifest, indent=1))
        write_step_marker(signals_dir, fingerprint, time.perf_counter() - t0, tasks, stats)
        save_json(
            stats,
            join_path(self.out, "stats.json"),
            {"input_files": len(files), "signals": join_path(signals_dir, DATA_DIR)},
        )
        print(format_table(stats), flush=True)
        print(f"signals: {join_path(signals_dir, DATA_DIR)}", flush=True)
        return RunResult(
            self.out, signals_dir, stats, len(files), 0, [{"step": SIGNALS_DIR, "skipped": False, **tasks}]
        )

    def _documents(self, signals_dir: str):
        from pyspark.sql import functions as F

        return self.spark.read.parquet(join_path(signals_dir, DATA_DIR)).where(F.col(DROP_REASON).isNull())

    def _decide_over_all(self, signals_dir: str, position: int, stage: GlobalStage) -> dict:
        """A whole-corpus stage's decision over every document the reader yielded, its rows saved split
        by part (as a full run saves a global step's); a dedup stage decides from the stored hashes or
        signatures. No index is saved: what a signals run keeps is no run's output."""
        from pyspark.sql import functions as F

        from pipelines.global_runners import global_runner
        from pipelines.steps import StepContext

        df = self._documents(signals_dir)
        folder = join_path(signals_dir, GLOBAL_DIR, f"{position:02d}_{stage.name}")
        if hasattr(stage, "save_index"):
            stage = stage.model_copy(update={"save_index": None})
        ctx = StepContext(
            spark=self.spark, step_dir=folder, config=self.config, prepared=stored_prepared(df, stage, position)
        )
        rows, state = global_runner(stage).decide(df, stage, ctx)
        if isinstance(stage, TopFraction):
            rows = _ranks(df, stage)
        if rows is not None:
            parts = df.select("id", F.element_at(F.split(F.input_file_name(), "/"), -1).alias(PART))
            rows.join(parts, "id").repartition(PART).write.mode("overwrite").partitionBy(PART).parquet(folder)
        self.spark.catalog.clearCache()
        stage.take_counters()
        return {"position": position, "stage": stage, "state": state, "rows": folder if rows is not None else None}

    def _annotate_parts(self, signals_dir: str, states: list[dict]) -> None:
        """Each part rewritten with the whole-corpus signals of its documents, one Spark task per part.
        Setting a column replaces it, so a part annotated by a run that died here is annotated again alike."""
        if not states:
            return
        parts = [p.rsplit("/", 1)[-1] for p in parquet_parts(join_path(signals_dir, DATA_DIR))]
        context = self.spark.sparkContext
        names, compression = context.broadcast(parts), self.config.output.compression
        data_dir = join_path(signals_dir, DATA_DIR)

        def annotate(batches):
            for rb in batches:
                for i in rb.column(0).to_pylist():
                    annotate_part(join_path(data_dir, names.value[i]), states, compression)
            yield from ()

        context.setJobGroup(
            f"dataprep-signals-annotate-{time.time_ns()}",
            "dataprep signals: whole-corpus columns",
            interruptOnCancel=True,
        )
        try:
            self.spark.range(0, len(parts), 1, max(1, len(parts))).mapInArrow(annotate, "task long").write.format(
                "noop"
            ).mode("overwrite").save()
        finally:
            context.setLocalProperty("spark.jobGroup.id", None)


def stored_prepared(df, stage: GlobalStage, position: int):
    """A dedup stage's per-document rows as its Spark decision reads them (``ctx.prepared``), from the
    stored columns of the documents in ``df``: MinHash band keys are made again from the stored
    signatures, for the stage's own bands (cheap; the shingling is what is not redone)."""
    from pyspark.sql import functions as F

    if stage.name not in PREPARED_SETTINGS:
        return None
    p = prefix(position, stage.name)
    columns = [f.name for f in stage.prepared_schema if f.name != "id"]
    if stage.name != "minhash_dedup":
        return df.where(F.col(p + columns[0]).isNotNull()).select("id", *[F.col(p + c).alias(c) for c in columns])
    from pyspark.sql.pandas.types import from_arrow_schema

    from pipelines.progress import timed

    def with_keys(batches):
        import numpy as np

        for rb in batches:
            sigs = np.asarray(rb.column("sig").flatten().to_numpy(zero_copy_only=False)).reshape(-1, stage.num_perm)
            keys = stage.band_keys(sigs.view(np.uint32))
            offsets = pa.array(
                np.arange(0, keys.size + 1, keys.shape[1] if keys.size else 1, dtype=np.int32)[: len(keys) + 1]
            )
            yield pa.RecordBatch.from_arrays(
                [rb.column("id"), rb.column("sig"), pa.ListArray.from_arrays(offsets, keys.ravel())],
                schema=stage.prepared_schema,
            )

    sigs = df.where(F.col(p + "sig").isNotNull()).select("id", F.col(p + "sig").alias("sig"))
    return sigs.mapInArrow(timed(with_keys), from_arrow_schema(stage.prepared_schema))


def _ranks(df, stage: TopFraction):
    """(id, rank) of each scored document: 1 for the highest score of its group (ties by id)."""
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    from pipelines.decisions.top_fraction import score_group

    scored = df.where(F.col(stage.score).isNotNull() & ~F.isnan(F.col(stage.score).cast("double")))
    order = Window.partitionBy(score_group(stage)).orderBy(F.col(stage.score).desc(), F.col("id"))
    return scored.select("id", F.row_number().over(order).cast("long").alias(RANK))


def annotate_part(path: str, states: list[dict], compression: str) -> None:
    """One part with each whole-corpus stage's columns: the stage's own applier marks the documents of
    the part with its decision (its columns and reason go under the stage's prefix); the reader's drops
    have none."""
    name = path.rsplit("/", 1)[-1]
    with fsspec.open(path, "rb") as fh:
        table = pq.read_table(fh)
    live_mask = pc.is_null(table.column(DROP_REASON))
    live, dead = table.filter(live_mask), table.filter(pc.invert(live_mask))
    for state in states:
        stage, p = state["stage"], prefix(state["position"], state["stage"].name)
        rows = read_decisions(state["rows"], [name]) if state["rows"] else None
        applier = stage.applier(state["state"])
        [(out, reasons)], _ = run_task(
            apply_task(applier, name, None if isinstance(stage, TopFraction) else rows, [live])
        )
        for f in applier.output_fields(live.schema):
            live = with_column(live, p + f.name, out.column(f.name))
        if isinstance(stage, TopFraction):
            live = with_column(live, p + "score", live.column(stage.score).cast(pa.float64()))
            live = with_column(live, p + RANK, _take(rows, RANK, live.column("id"), pa.int64()))
        live = with_column(live, p + REASON, reasons, pa.string())
    from dataprep.core.runner import conform

    table = pa.concat_tables([live, conform(dead, live.schema)]) if dead.num_rows else live
    with storage.atomic_output(path, suffix=".parquet") as tmp:
        pq.write_table(table, tmp, compression=compression)


def _take(rows: pa.Table | None, column: str, ids: pa.ChunkedArray, type_: pa.DataType) -> pa.Array:
    if rows is None or rows.num_rows == 0:
        return pa.nulls(len(ids), type_)
    return rows.column(column).take(pc.index_in(ids, value_set=rows.column("id"))).cast(type_)


def _stats_of(marker: dict):
    from dataprep.core.stats import StageStats

    return [StageStats.from_dict(d) for d in marker.get("stats", [])]


def run_signals(config, spark=None, force: bool = False, overwrite: bool = False) -> RunResult:
    return SignalsRun(config, spark=spark, force=force, overwrite=overwrite).run()
