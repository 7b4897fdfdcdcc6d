"""Which Spark code runs each global (whole-corpus) stage: the map lives here, on the Spark side, so the
stages in ``dataprep`` never name the code that runs them on Spark.

A global stage runs in two halves (``GlobalRunner``):

- ``decide(df, stage, ctx) -> (rows, state)``: what needs every document, on Spark. ``df`` holds the
  documents still kept. ``rows``: decision rows keyed by ``id`` for the documents the decision
  concerns (a dedup's clusters, the paragraphs to cut), or None; ``state``: anything else the tasks
  need, as JSON (score cut-offs). It may record counters on the stage and write side outputs under
  ``ctx.step_dir`` (a ``pipelines.steps.StepContext``); nothing may be collected on the driver in bulk.
- ``applier(stage, state, ctx)``: the per-task half (``dataprep.core.applier.Applier``), run on each part
  of the previous step's output with the decision rows of that part's documents.
- ``prepare(stage) -> (fn, schema)``, optional: the per-document part of the decision (exact dedup's
  hashes, MinHash signatures, paragraph dedup's window keys). The pipeline runs ``fn`` (a batch of kept
  documents' ``pipelines.steps.PREPARE_COLUMNS`` -> a table in ``schema``) as tasks over the previous
  step's parts and saves their rows with a marker each, so a run that dies while deciding keeps the
  tasks that finished; ``decide`` then finds the rows in ``ctx.prepared`` (None: compute them).
- ``complete(stage, state, ctx, finished)``, optional: on the driver after every task, ``finished``
  iterating what each task's ``Applier.finish`` returned (tokenize writes its manifest from them).

The pipeline (``pipelines.pipeline_run``) saves the decision, then runs the tasks like a document step's,
so a run that dies after deciding keeps the decision, and one that dies among the tasks keeps those
that finished. ``run_global`` does both halves on one DataFrame, with the same appliers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

from dataprep.core.stage import DROP_REASON, DROP_STAGE, GlobalStage, with_fields
from dataprep.dedup import minhash
from dataprep.dedup.exact import ExactDedup
from dataprep.dedup.marks import MarkDuplicates
from dataprep.dedup.minhash import MinHashDedup
from dataprep.dedup.paragraphs import CutParagraphs, ParagraphDedup
from dataprep.dedup.urls import UrlDedup
from dataprep.quality.top_fraction import CutBelow, TopFraction
from dataprep.tokenize.manifest import begin_dataset, finish_dataset
from dataprep.tokenize.stage import Tokenize, WriteShards
from pipelines.dedup import BROADCAST_ROWS, SIGNATURE_SCHEMA, exact_clusters, minhash_clusters, signature_rows, url_clusters
from pipelines.paragraph_dedup import KEY_SCHEMA, cuts_by_document, key_rows
from pipelines.progress import timed
from pipelines.token_shards import output_dir, trained_tokenizer
from pipelines.top_fraction import top_fraction_cutoffs


@dataclass(frozen=True)
class GlobalRunner:
    decide: Callable
    applier: Callable
    complete: Callable | None = None
    prepare: Callable | None = None


def _tokenize_decide(df, stage: Tokenize, ctx):
    trained_tokenizer(df, stage)  # trained once when asked and missing; tasks load it
    begin_dataset(output_dir(stage, ctx))  # no manifest while shards change
    return None, {}


def _tokenize_complete(stage: Tokenize, state: dict, ctx, finished) -> None:
    shards = [shard for task in finished for shard in task.get("shards", [])]
    finish_dataset(output_dir(stage, ctx), shards, stage.load_tokenizer(), stage.manifest_extra())


# Stage class -> its Spark runner; a subclass runs on its parent's. Another package's global stage
# adds its own entry.
GLOBAL_RUNNERS: dict[type[GlobalStage], GlobalRunner] = {
    ExactDedup: GlobalRunner(
        lambda df, stage, ctx: (exact_clusters(df, stage, ctx), {}),
        lambda stage, state, ctx: stage.applier(state),
        prepare=lambda stage: (stage.prepare, stage.prepared_schema)),
    MinHashDedup: GlobalRunner(
        lambda df, stage, ctx: (minhash_clusters(df, stage, ctx), {}),
        lambda stage, state, ctx: MarkDuplicates(stage.name, minhash.REASON, minhash.CLUSTER, minhash.CLUSTER_SIZE,
                                                 stage.weight_ranges() if stage.sample_weights else None),
        prepare=lambda stage: (signature_rows(stage), SIGNATURE_SCHEMA)),
    UrlDedup: GlobalRunner(
        lambda df, stage, ctx: (url_clusters(df, stage, ctx), {}),
        lambda stage, state, ctx: stage.applier(state)),
    ParagraphDedup: GlobalRunner(
        lambda df, stage, ctx: (cuts_by_document(df, stage, ctx)[0], {}),
        lambda stage, state, ctx: CutParagraphs(stage),
        prepare=lambda stage: (key_rows(stage), KEY_SCHEMA)),
    Tokenize: GlobalRunner(
        _tokenize_decide,
        lambda stage, state, ctx: WriteShards(stage, stage.load_tokenizer(), output_dir(stage, ctx)),
        _tokenize_complete),
    TopFraction: GlobalRunner(
        lambda df, stage, ctx: (None, {"cutoffs": top_fraction_cutoffs(df, stage)}),
        lambda stage, state, ctx: CutBelow(stage, state["cutoffs"])),
}


def global_runner(stage: GlobalStage) -> GlobalRunner:
    """The Spark implementation of ``stage``: the entry of its class, or of the nearest class it derives from."""
    for cls in type(stage).__mro__:
        if cls in GLOBAL_RUNNERS:
            return GLOBAL_RUNNERS[cls]
    raise TypeError(f"global stage {stage.name!r} has no Spark runner (add its class to pipelines.global_runners.GLOBAL_RUNNERS)")


DECISION = "_decision"  # the decision row of each document, joined on for run_global


def run_global(df: DataFrame, stage: GlobalStage, ctx=None) -> DataFrame:
    """Both halves of a whole-corpus stage on one DataFrame (tests, benches, notebooks): decide over
    ``df``, then every Spark task applies the decision to its documents with the pipeline's applier.
    Every document stays; those the stage drops get ``drop_stage`` / ``drop_reason``."""
    if isinstance(stage, Tokenize):
        raise TypeError("tokenize writes shards: use pipelines.token_shards.run_tokenize")
    df = df.drop(*[c for c in (DROP_STAGE, DROP_REASON, DECISION) if c in df.columns])
    runner = global_runner(stage)
    rows, state = runner.decide(df, stage, ctx)
    applier = runner.applier(stage, state, ctx)
    input_schema = to_arrow_schema(df.schema)
    output_schema = with_fields(input_schema, applier.output_fields(input_schema) + [
        pa.field(DROP_STAGE, pa.string()), pa.field(DROP_REASON, pa.string())])
    has_rows = rows is not None  # the closure below must not hold the DataFrame
    fields = [c for c in rows.columns if c != "id"] if has_rows else []
    if has_rows:
        decisions = rows.select("id", F.struct(*fields).alias(DECISION))
        # few decision rows (the usual case): broadcast, the documents are not shuffled; many: a
        # sort-merge join, so what passes through the driver never grows with the corpus
        df = df.join(F.broadcast(decisions) if rows.count() <= BROADCAST_ROWS else decisions.hint("merge"), "id", "left")

    def apply(batches):
        from pyspark import TaskContext

        key = f"partition-{TaskContext.get().partitionId()}"
        if not has_rows:
            applier.begin(key, None)
        for rb in batches:
            batch = pa.Table.from_batches([rb])
            if has_rows:  # each batch brings the decision rows of its own documents
                joined = batch.column(DECISION)
                has = joined.is_valid()
                columns = joined.filter(has).combine_chunks().flatten()
                applier.begin(key, pa.Table.from_arrays([batch.column("id").filter(has), *columns], names=["id", *fields]))
                batch = batch.drop_columns([DECISION])
            out, reasons = applier.process(batch)
            dropped = [None if r is None else applier.stage_name for r in reasons]
            out = out.append_column(DROP_STAGE, pa.array(dropped, pa.string())).append_column(DROP_REASON, pa.array(reasons, pa.string()))
            yield from out.select(output_schema.names).cast(output_schema).to_batches()
        applier.finish()

    return df.mapInArrow(timed(apply), from_arrow_schema(output_schema))
