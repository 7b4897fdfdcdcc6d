"""Spark's form of ``dataprep.dedup.priority``: each duplicate cluster keeps the copy whose source kind
comes first in the stage's ``priority`` list, the smallest id among equals; a document of a saved index
(an earlier run's) keeps winning, since it is in a corpus already. Removals are counted per pair of
sources on the driver from one small aggregate."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from dataprep.core.stage import WEB
from dataprep.dedup.index import EARLIER, IndexedStage
from dataprep.dedup.priority import PAIR


def _kinds(df: DataFrame) -> DataFrame:
    kind = F.coalesce(F.col("source_kind"), F.lit(WEB)) if "source_kind" in df.columns else F.lit(WEB)
    return df.select("id", kind.alias("_kind"))


def prioritized(clusters: DataFrame, df: DataFrame, stage: IndexedStage, cluster: str) -> DataFrame:
    """``clusters`` (id, cluster, size; ids of saved indexes prefixed by EARLIER) with each cluster's
    kept copy chosen by ``stage.priority``, its removals counted on the stage; unchanged without a list."""
    if not stage.priority:
        return clusters
    position = F.array_position(F.array(*[F.lit(k) for k in stage.priority]), F.coalesce(F.col("_kind"), F.lit(WEB)))
    rank = (
        F.when(F.col("id").startswith(EARLIER), F.lit(-1))
        .when(position == 0, F.lit(len(stage.priority)))
        .otherwise(position - 1)
    )
    ranked = clusters.join(_kinds(df), "id", "left").withColumn("_rank", rank)
    best = F.min(F.struct("_rank", "id")).over(Window.partitionBy(cluster))
    chosen = ranked.withColumn(cluster, best["id"]).cache()
    kept_kind = chosen.where(F.col("id") == F.col(cluster)).select(
        F.col("id").alias(cluster), F.col("_kind").alias("_kept")
    )
    pairs = chosen.where(F.col("id") != F.col(cluster)).join(kept_kind, cluster, "left")
    for row in pairs.groupBy(F.coalesce("_kind", F.lit(WEB)), F.coalesce("_kept", F.lit(WEB))).count().collect():
        stage.count(f"{PAIR}{row[0]}->{row[1]}", row[2])
    return chosen.drop("_kind", "_rank")
