"""The Spark form of each global (whole-corpus) stage's decision (``pipelines.decisions``): the map lives
here, on the Spark side, so the stages in ``dataprep`` never name the code that runs them on Spark.

A global stage (``dataprep.core.stage.GlobalStage``) declares its parts once: ``prepare`` (per document),
``decide`` (in memory), ``applier`` (per task) and ``complete`` (after the tasks). On Spark every part
but ``decide`` runs as it is; ``decide`` has a Spark form of the same rule (``GlobalRunner.decide``):

- ``decide(df, stage, ctx) -> (rows, state)``: ``df`` holds the documents still kept. ``rows``: decision
  rows keyed by ``id`` for the documents the decision concerns (a dedup's clusters, the paragraphs to
  cut) as a DataFrame, or None; ``state``: anything else the tasks need, as JSON (score cut-offs). It
  may record counters on the stage and write side outputs under ``ctx.step_dir`` (a
  ``pipelines.steps.StepContext``); nothing may be collected on the driver in bulk.
- ``prepares``: the pipeline runs ``stage.prepare`` over the kept documents'
  ``pipelines.steps.PREPARE_COLUMNS`` as tasks over the previous step's parts and saves their rows with
  a marker each, so a run that dies while deciding keeps the tasks that finished; ``decide`` then finds
  the rows in ``ctx.prepared`` (None: it computes them).

The pipeline (``pipelines.global_step``) saves the decision, then runs ``stage.applier(state)`` on
each part like a document step's, so a run that dies after deciding keeps the decision, and one that
dies among the tasks keeps those that finished. ``run_global`` does it all on one DataFrame.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from typing import Callable

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

from dataprep.core.applier import apply_task, processed
from dataprep.core.stage import DROP_REASON, DROP_STAGE, GlobalStage, with_fields
from dataprep.dedup.exact import ExactDedup
from dataprep.dedup.minhash import MinHashDedup
from dataprep.dedup.paragraphs import ParagraphDedup
from dataprep.dedup.urls import UrlDedup
from dataprep.quality.top_fraction import TopFraction
from dataprep.tokenize.stage import Tokenize
from pipelines.decisions import exact_dedup, minhash_dedup, paragraph_dedup, tokenize, top_fraction, url_dedup
from pipelines.decisions.shared import BROADCAST_ROWS
from pipelines.progress import timed


@dataclass(frozen=True)
class GlobalRunner:
    decide: Callable
    prepares: bool = False


# Stage class -> the Spark form of its decision; a subclass runs on its parent's. Another package's
# global stage adds its own entry.
GLOBAL_RUNNERS: dict[type[GlobalStage], GlobalRunner] = {
    ExactDedup: GlobalRunner(exact_dedup.decide, prepares=True),
    MinHashDedup: GlobalRunner(minhash_dedup.decide, prepares=True),
    UrlDedup: GlobalRunner(url_dedup.decide),
    ParagraphDedup: GlobalRunner(paragraph_dedup.decide, prepares=True),
    Tokenize: GlobalRunner(tokenize.decide),
    TopFraction: GlobalRunner(top_fraction.decide),
}


def global_runner(stage: GlobalStage) -> GlobalRunner:
    """The Spark implementation of ``stage``: the entry of its class, or of the nearest class it derives from."""
    for cls in type(stage).__mro__:
        if cls in GLOBAL_RUNNERS:
            return GLOBAL_RUNNERS[cls]
    raise TypeError(
        f"global stage {stage.name!r} has no Spark runner (add its class to pipelines.global_runners.GLOBAL_RUNNERS)"
    )


def completes(stage: GlobalStage) -> bool:
    """Whether ``stage`` has work after its tasks (its own ``complete``)."""
    return type(stage).complete is not GlobalStage.complete


DECISION = "_decision"  # the decision row of each document, joined on for run_global


FINISHED = "_finished"  # run_global: one row per task with what its applier's finish returned (JSON)


def run_global(df: DataFrame, stage: GlobalStage, ctx=None) -> DataFrame:
    """Every part of a whole-corpus stage on one DataFrame (tests, benches, notebooks): decide over
    ``df``, every Spark task applies the decision to its documents with the stage's applier, then the
    stage completes (tokenize: computed here, so its shards and manifest exist on return). Every
    document stays; those the stage drops get ``drop_stage`` / ``drop_reason``."""
    df = df.drop(*[c for c in (DROP_STAGE, DROP_REASON, DECISION) if c in df.columns])
    rows, state = global_runner(stage).decide(df, stage, ctx)
    applier = stage.applier(state)
    finishes = completes(stage)
    input_schema = to_arrow_schema(df.schema)
    extra = [pa.field(DROP_STAGE, pa.string()), pa.field(DROP_REASON, pa.string())] + (
        [pa.field(FINISHED, pa.string())] if finishes else []
    )
    output_schema = with_fields(input_schema, applier.output_fields(input_schema) + extra)
    has_rows = rows is not None  # the closure below must not hold the DataFrame
    fields = [c for c in rows.columns if c != "id"] if has_rows else []
    if has_rows:
        decisions = rows.select("id", F.struct(*fields).alias(DECISION))
        # few decision rows (the usual case): broadcast, the documents are not shuffled; many: a
        # sort-merge join, so what passes through the driver never grows with the corpus
        df = df.join(
            F.broadcast(decisions) if rows.count() <= BROADCAST_ROWS else decisions.hint("merge"), "id", "left"
        )

    def apply(batches):
        from pyspark import TaskContext

        key = f"{TaskContext.get().partitionId():05d}"
        if has_rows:
            with (
                tempfile.TemporaryFile() as spill
            ):  # the task's documents wait on local disk while its decision rows are gathered
                decisions = _spill_decisions(batches, fields, spill)
                finished = yield from apply_task(applier, key, decisions, _read_spill(spill), outputs)
        else:
            finished = yield from apply_task(
                applier, key, None, (pa.Table.from_batches([rb]) for rb in batches), outputs
            )
        if finishes:  # one more row, all null but FINISHED
            row = {f.name: pa.nulls(1, f.type) for f in output_schema}
            row[FINISHED] = pa.array([json.dumps(finished)], pa.string())
            yield from pa.table(row, schema=output_schema).to_batches()

    def outputs(tables):
        for batch in tables:
            out, reasons = processed(applier, batch)
            dropped = [None if r is None else applier.stage_name for r in reasons]
            out = out.append_column(DROP_STAGE, pa.array(dropped, pa.string())).append_column(
                DROP_REASON, pa.array(reasons, pa.string())
            )
            if finishes:
                out = out.append_column(FINISHED, pa.nulls(out.num_rows, pa.string()))
            yield from out.select(output_schema.names).cast(output_schema).to_batches()

    out = df.mapInArrow(timed(apply), from_arrow_schema(output_schema))
    if not finishes:
        return out
    out = out.persist(StorageLevel.DISK_ONLY)  # computed once: the tasks' side effects are not repeated
    stage.complete(state, [json.loads(r[0]) for r in out.where(F.col(FINISHED).isNotNull()).select(FINISHED).collect()])
    return out.where(F.col(FINISHED).isNull()).drop(FINISHED)


def _spill_decisions(batches, fields: list[str], spill) -> pa.Table | None:
    """Write a task's batches, less their joined ``DECISION`` column, to ``spill``; return the decision
    rows of all its documents (None: none has one), which its applier begins with."""
    rows, writer = [], None
    for rb in batches:
        batch = pa.Table.from_batches([rb])
        joined = batch.column(DECISION)
        has = joined.is_valid()
        if pc.any(has).as_py():
            columns = joined.filter(has).combine_chunks().flatten()
            rows.append(pa.Table.from_arrays([batch.column("id").filter(has), *columns], names=["id", *fields]))
        batch = batch.drop_columns([DECISION])
        writer = writer or pa.ipc.new_stream(spill, batch.schema)
        writer.write_table(batch)
    if writer is not None:
        writer.close()
    spill.seek(0)
    return pa.concat_tables(rows) if rows else None


def _read_spill(spill):
    if spill.seek(0, 2) == 0:  # an empty task wrote nothing
        return
    spill.seek(0)
    for rb in pa.ipc.open_stream(spill):
        yield pa.Table.from_batches([rb])
