"""A seeded random sample of document texts from a pipeline output or a crawl, on Spark: the
negatives of a classifier trained from reference text (DCLM samples them from the crawl it filters).

Each text is ranked by a hash of itself and the seed and the lowest ``n`` are taken (Spark's top-k
per partition, then one merge: no full sort, only ``n`` texts reach the driver), so the sample is the
same at any partitioning and for any number of input files.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dataprep.core.stage import DROP_REASON
from dataprep.core.storage import expand_inputs


def read_documents(spark: SparkSession, paths: list[str], text_field: str = "text") -> DataFrame:
    """One ``text`` column from Parquet (a pipeline's corpus or step data: kept rows only) or JSONL files."""
    files = [p for p in expand_inputs(paths) if not p.rsplit("/", 1)[-1].startswith(("_", "."))]
    parquet = [p for p in files if p.endswith(".parquet")]
    jsonl = [p for p in files if p.removesuffix(".gz").endswith((".jsonl", ".json"))]
    if len(parquet) + len(jsonl) != len(files):
        other = sorted(set(files) - set(parquet) - set(jsonl))[:3]
        raise ValueError(f"negatives must be Parquet or JSONL files (a pipeline output or extracted crawl), not {other}")
    frames = []
    if parquet:
        df = spark.read.parquet(*parquet)
        frames.append(df.where(F.col(DROP_REASON).isNull()) if DROP_REASON in df.columns else df)
    if jsonl:  # only the text field is read: no schema inference over the whole crawl
        frames.append(spark.read.schema(f"`{text_field}` string").json(jsonl))
    for df in frames:
        if text_field not in df.columns:
            raise ValueError(f"negatives: no {text_field!r} field (columns: {sorted(df.columns)})")
    texts = [df.select(F.col(text_field).cast("string").alias("text")) for df in frames]
    out = texts[0]
    for df in texts[1:]:
        out = out.unionByName(df)
    return out.where(F.col("text").isNotNull() & (F.length(F.trim("text")) > 0))


def sample_texts(spark: SparkSession, paths: list[str], n: int, seed: int, text_field: str = "text") -> list[str]:
    """Up to ``n`` texts drawn at random (seeded) from the documents at ``paths``."""
    df = read_documents(spark, paths, text_field)
    ranked = df.withColumn("_rank", F.xxhash64("text", F.lit(seed)))
    return [row.text for row in ranked.orderBy("_rank", "text").limit(n).collect()]
