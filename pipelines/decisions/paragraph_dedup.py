"""The Spark decision of ``paragraph_dedup`` (the rules: ``dataprep.dedup.paragraphs``).

1. every task hashes the windows of its documents: (id, key) rows, one per distinct key of a document;
2. a window over the key (one shuffle by hash) counts the documents holding it and their smallest id;
   rows of keys held by more than ``max_documents`` documents are the cuts (minus the smallest id's
   own row with ``keep: first``);
3. the cuts, gathered per document, are the decision rows: each task cuts the texts of its own
   documents (``dataprep.dedup.paragraphs.CutParagraphs``) with the rows of those documents.
Nothing but the three counters reaches the driver; the result does not depend on the partitioning.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from dataprep.dedup.paragraphs import CUTS, ParagraphDedup
from pipelines.decisions.shared import materialize, prepared_rows


def cuts(df: DataFrame, stage: ParagraphDedup, ctx=None) -> DataFrame:
    """(id, key): the keys to cut from each document; the keys of every document are those the
    pipeline's tasks saved (``ctx.prepared``) when there are."""
    prepared = getattr(ctx, "prepared", None)
    rows = prepared if prepared is not None else prepared_rows(df, stage.prepare, stage.prepared_schema)
    by_key = Window.partitionBy("key")
    rows = rows.select("id", "key", F.count("*").over(by_key).alias("docs"), F.min("id").over(by_key).alias("first"))
    rows = rows.where(F.col("docs") > stage.max_documents)
    if stage.keep == "first":
        rows = rows.where(F.col("id") != F.col("first"))
    return rows.select("id", "key")


def cuts_by_document(df: DataFrame, stage: ParagraphDedup, ctx=None) -> tuple[DataFrame, int]:
    """(id, keys to cut) for each document with cuts, and how many cuts there are in all; records the
    stage's counters."""
    found = materialize(cuts(df, stage, ctx))
    counts = found.agg(F.count("*"), F.countDistinct("id"), F.countDistinct("key")).first()
    stage.record({"segments_removed": counts[0], "documents_changed": counts[1], "duplicated_segments": counts[2]})
    return materialize(found.groupBy("id").agg(F.collect_list("key").alias(CUTS))), counts[0]


def decide(df: DataFrame, stage: ParagraphDedup, ctx=None) -> tuple[DataFrame, dict]:
    return cuts_by_document(df, stage, ctx)[0], {}
