"""Spark runner for ``paragraph_dedup`` (contract: ``pipelines/global_runners.py``; the rules: dataprep.dedup.paragraphs).

1. every task hashes the windows of its documents: (id, key) rows, one per distinct key of a document;
2. a window over the key (one shuffle by hash) counts the documents holding it and their smallest id;
   rows of keys held by more than ``max_documents`` documents are the cuts (minus the smallest id's
   own row with ``keep: first``);
3. the cuts, gathered per document, are joined back to the documents, and each task rewrites the texts
   that have cuts. While there are at most BROADCAST_CUTS cuts they are broadcast (the corpus is not
   shuffled); beyond that, a sort-merge join shuffles the documents by id, so what the driver holds
   never grows with the corpus.
Nothing but the three counters and a bounded broadcast reaches the driver; the result does not depend
on the partitioning.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType
from pyspark.sql.window import Window

from dataprep.dedup.paragraphs import CUTS, ParagraphDedup
from dataprep.core.stage import DROP_REASON, DROP_STAGE
from pipelines.dedup import _materialize
from pipelines.progress import timed

# A broadcast passes through the driver (~100 bytes a cut with its document id): capped by a constant.
BROADCAST_CUTS = 200_000


def cuts(df: DataFrame, stage: ParagraphDedup) -> DataFrame:
    """(id, key): the keys to cut from each document."""

    def keys(batches):
        for rb in batches:
            yield stage.key_batch(rb.column("id").to_pylist(), rb.column("text").to_pylist())

    rows = df.select("id", "text").mapInArrow(timed(keys), "id string, key bigint")
    by_key = Window.partitionBy("key")
    rows = rows.select("id", "key", F.count("*").over(by_key).alias("docs"), F.min("id").over(by_key).alias("first"))
    rows = rows.where(F.col("docs") > stage.max_documents)
    if stage.keep == "first":
        rows = rows.where(F.col("id") != F.col("first"))
    return rows.select("id", "key")


def cuts_by_document(df: DataFrame, stage: ParagraphDedup) -> tuple[DataFrame, int]:
    """(id, keys to cut) for each document with cuts, and how many cuts there are in all; records the
    stage's counters."""
    found = _materialize(cuts(df, stage))
    counts = found.agg(F.count("*"), F.countDistinct("id"), F.countDistinct("key")).first()
    stage.record({"segments_removed": counts[0], "documents_changed": counts[1], "duplicated_segments": counts[2]})
    return _materialize(found.groupBy("id").agg(F.collect_list("key").alias(CUTS))), counts[0]


def run_paragraph_dedup(df: DataFrame, stage: ParagraphDedup, ctx=None) -> DataFrame:
    """Cut duplicated segments out of the documents; drop those left too short."""
    df = df.drop(*[c for c in (DROP_STAGE, DROP_REASON) if c in df.columns])
    per_doc, removed = cuts_by_document(df, stage)
    per_doc = F.broadcast(per_doc) if removed <= BROADCAST_CUTS else per_doc.hint("merge")
    columns = df.columns
    schema = StructType(df.schema.fields + [StructField(DROP_STAGE, StringType()), StructField(DROP_REASON, StringType())])

    def rewrite(batches):
        for rb in batches:
            texts, reasons = stage.remove(rb.column("text").to_pylist(), rb.column(CUTS).to_pylist())
            arrays = [pa.array(texts, rb.schema.field("text").type) if c == "text" else rb.column(c) for c in columns]
            dropped = [None if r is None else stage.name for r in reasons]
            yield pa.RecordBatch.from_arrays(arrays + [pa.array(dropped, pa.string()), pa.array(reasons, pa.string())], names=[*columns, DROP_STAGE, DROP_REASON])

    return df.join(per_doc, "id", "left").select(*columns, CUTS).mapInArrow(timed(rewrite), schema)
