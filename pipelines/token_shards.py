"""Spark side of the ``tokenize`` stage: where its shards go, its tokenizer (trained on a Spark-drawn
sample when asked and missing), and ``run_tokenize``, the stage on one DataFrame.

A pipeline runs tokenize as a global step (``pipelines.global_runners``): the tokenizer is its decision,
and each task encodes its part into shards named after the task (``WriteShards``). ``run_tokenize`` (tests,
benches) makes each partition a task instead: shards ``shard-<partition>-<sequence>``, deterministic, so a
retried or rerun task overwrites its files (written atomically) instead of adding duplicates. Tasks
return one small row per shard with its metadata; the driver collects those (one row per shard, not per
document), deletes files of earlier runs that this one did not write, and writes ``manifest.json`` last.
Documents come back with ``num_tokens``; the computed result is persisted so a write does not encode again.
"""

from __future__ import annotations

import json

import pyarrow as pa

from dataprep.core.stage import DROP_REASON, DROP_STAGE
from dataprep.core.storage import join_path
from dataprep.tokenize.manifest import begin_dataset, finish_dataset
from dataprep.tokenize.stage import NUM_TOKENS, Tokenize, WriteShards
from pipelines.progress import timed

SHARD_INFO = "_shard"  # internal column: JSON metadata on the one row per shard, null on documents
SHARDS_DIR = "shards"


def output_dir(stage: Tokenize, ctx) -> str:
    """The stage's shards folder (``<output>/shards`` in a pipeline); the step's own without a run."""
    return stage.shards_dir or join_path(ctx.step_dir, SHARDS_DIR)


def run_tokenize(df, stage: Tokenize, ctx):
    """Global runner contract (pipelines.global_runners): same rows plus ``num_tokens``, ``drop_stage``, ``drop_reason``."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    tokenizer = trained_tokenizer(df, stage)
    out_dir = output_dir(stage, ctx)
    begin_dataset(out_dir)
    df = df.drop(*[c for c in (NUM_TOKENS, DROP_STAGE, DROP_REASON, SHARD_INFO) if c in df.columns])
    extra = [(NUM_TOKENS, LongType()), (DROP_STAGE, StringType()), (DROP_REASON, StringType()), (SHARD_INFO, StringType())]
    schema = StructType(df.schema.fields + [StructField(name, t, True) for name, t in extra])
    encode = _partition_encoder(stage, tokenizer, out_dir, schema)
    result = df.mapInArrow(timed(encode), schema).persist(StorageLevel.DISK_ONLY)  # in memory, a big corpus outgrows the JVM heap
    shards = [json.loads(row[0]) for row in result.where(F.col(SHARD_INFO).isNotNull()).select(SHARD_INFO).collect()]
    finish_dataset(out_dir, shards, tokenizer, stage.manifest_extra())
    return result.where(F.col(SHARD_INFO).isNull()).drop(SHARD_INFO)


def trained_tokenizer(df, stage: Tokenize):
    """The stage's tokenizer; trained first on a Spark-drawn sample of ``df`` when asked and missing."""
    from dataprep.tokenize.tokenizer import tokenizer_exists

    if stage.train is not None and not tokenizer_exists(stage.tokenizer_dir):
        from pipelines.train_tokenizer import train_from_dataframe

        return train_from_dataframe(df, stage.tokenizer_dir, stage.train)
    return stage.load_tokenizer()


def _partition_encoder(stage: Tokenize, tokenizer, out_dir: str, schema):
    """The mapInArrow function: each partition is a task of ``WriteShards``; it closes over the
    tokenizer (pickled as its model bytes)."""
    arrow_schema = pa.schema([pa.field(f.name, _arrow_type(f.dataType)) for f in schema.fields])

    def encode(batches):
        from pyspark import TaskContext

        writer = WriteShards(stage, tokenizer, out_dir)
        writer.begin(f"{TaskContext.get().partitionId():05d}", None)
        for batch in batches:
            table, reasons = writer.process(pa.Table.from_batches([batch]))
            dropped = [None if r is None else stage.name for r in reasons]
            table = table.append_column(DROP_STAGE, pa.array(dropped, pa.string()))
            table = table.append_column(DROP_REASON, pa.array(reasons, pa.string()))
            table = table.append_column(SHARD_INFO, pa.nulls(table.num_rows, pa.string()))
            yield from table.cast(arrow_schema).to_batches()
        shards = writer.finish()["shards"]
        if shards:
            rows = {f.name: pa.nulls(len(shards), f.type) for f in arrow_schema}
            rows[SHARD_INFO] = pa.array([json.dumps(s) for s in shards], pa.string())
            yield from pa.table(rows, schema=arrow_schema).to_batches()

    return encode


def _arrow_type(spark_type) -> pa.DataType:
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(spark_type)
