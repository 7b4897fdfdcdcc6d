"""The Spark decision of ``exact_dedup`` (``dataprep.dedup.exact``): a window over the stage's own hashes,
the kept copy of each group its smallest id (or the best-ranked source's: ``pipelines.decisions.source_priority``)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from dataprep.dedup import exact
from dataprep.dedup.exact import ExactDedup
from pipelines.decisions.shared import (
    earlier_entries,
    materialize,
    prepared_rows,
    resolve_earlier,
    save_index,
    write_clusters,
)
from pipelines.decisions.source_priority import prioritized


def exact_clusters(df: DataFrame, stage: ExactDedup, ctx=None) -> DataFrame:
    """The Spark form of ``ExactDedup.decide`` (the same rule, as a window over the hash): the cluster
    rows of the documents whose normalized text another shares; the hashes are those the pipeline's
    tasks saved (``ctx.prepared``) when there are."""
    prepared = getattr(ctx, "prepared", None)
    hashes = prepared if prepared is not None else prepared_rows(df, stage.prepare, stage.prepared_schema)
    earlier = earlier_entries(df, stage, ["hash"])
    if earlier is not None:
        hashes = hashes.unionByName(earlier)
    group = Window.partitionBy("hash")
    grouped = hashes.select(
        "id",
        "hash",
        F.min("id").over(group).alias(exact.CLUSTER),
        F.count("*").over(group).alias(exact.CLUSTER_SIZE),
    )
    if stage.save_index:
        grouped = materialize(grouped)
        save_index(grouped.where(F.col("id") == F.col(exact.CLUSTER)).select("id", "hash"), stage)
    clusters = grouped.where(F.col(exact.CLUSTER_SIZE) > 1).select("id", exact.CLUSTER, exact.CLUSTER_SIZE)
    clusters = materialize(resolve_earlier(prioritized(clusters, df, stage, exact.CLUSTER), exact.CLUSTER))
    if stage.write_clusters:
        write_clusters(clusters, ctx, exact.CLUSTER, exact.CLUSTER_SIZE)
    return clusters


def decide(df: DataFrame, stage: ExactDedup, ctx=None) -> tuple[DataFrame, dict]:
    return exact_clusters(df, stage, ctx), {}
