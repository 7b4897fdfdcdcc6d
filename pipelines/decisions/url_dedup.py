"""The Spark decision of ``url_dedup`` (``dataprep.dedup.urls``): a window over the URL keys of the stage's own
``prepare``."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from dataprep.dedup import urls
from dataprep.dedup.urls import UrlDedup
from pipelines.decisions.shared import materialize, prepared_rows


def url_clusters(df: DataFrame, stage: UrlDedup, ctx=None) -> DataFrame:
    """The Spark form of ``UrlDedup.decide`` (the same rule, as a window over the URL key): the cluster
    rows of the documents whose normalized URL another shares. The keys are the stage's own ``prepare``,
    given each text's length (computed on the JVM) instead of the text."""
    length = F.coalesce(F.length("text"), F.lit(0)).cast("long").alias("length")
    keys = prepared_rows(df, stage.prepare, stage.prepared_schema, ["id", "url", "date", length])
    same_url = Window.partitionBy("url_key")
    first, second = stage.preference
    best_first = same_url.orderBy(F.desc(first), F.desc(second), F.asc("id"))
    clusters = keys.select(
        "id", F.first("id").over(best_first).alias(urls.CLUSTER), F.count("*").over(same_url).alias(urls.CLUSTER_SIZE)
    ).where(F.col(urls.CLUSTER_SIZE) > 1)
    return materialize(clusters)


def decide(df: DataFrame, stage: UrlDedup, ctx=None) -> tuple[DataFrame, dict]:
    return url_clusters(df, stage, ctx), {}
