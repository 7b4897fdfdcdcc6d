"""A seeded uniform sample of document texts on Spark, the one rule for every sample: a tokenizer's
training text (``dataprep train-tokenizer``, the ``tokenize`` stage on Spark) and the negatives of a
classifier trained from reference text (DCLM samples them from the crawl it filters).

The rule is ``dataprep.core.sampling``'s, the in-memory runner's too: each kept text is ranked by a hash
of the seed and itself and the lowest ``n`` are taken (a rank range first, then Spark's top-k: no full
sort, only ``n`` texts reach the driver), so every document is equally likely and the sample is the same
at any partitioning, for any number of input files, and in memory. Rows a stage dropped
(``drop_reason`` set) are never sampled.
"""

from __future__ import annotations

import math
from typing import Iterator

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dataprep.core.errors import UsageError
from dataprep.core.inputs import expand_inputs
from dataprep.core.sampling import RANK_RANGE, oversampled_fraction, sample_info
from dataprep.core.stage import DROP_REASON


def read_documents(spark: SparkSession, paths: list[str], text_field: str = "text") -> DataFrame:
    """One ``text`` column from Parquet (a pipeline's corpus or step data: kept rows only) or JSONL files."""
    files = [p for p in expand_inputs(paths) if not p.rsplit("/", 1)[-1].startswith(("_", "."))]
    parquet = [p for p in files if p.endswith(".parquet")]
    jsonl = [p for p in files if p.removesuffix(".gz").endswith((".jsonl", ".json"))]
    if len(parquet) + len(jsonl) != len(files):
        other = sorted(set(files) - set(parquet) - set(jsonl))[:3]
        raise UsageError(
            f"negatives must be Parquet or JSONL files (a pipeline output or extracted crawl), not {other}"
        )
    frames = []
    if parquet:
        df = spark.read.parquet(*parquet)
        frames.append(df.where(F.col(DROP_REASON).isNull()) if DROP_REASON in df.columns else df)
    if jsonl:  # only the text field is read: no schema inference over the whole crawl
        frames.append(spark.read.schema(f"`{text_field}` string").json(jsonl))
    for df in frames:
        if text_field not in df.columns:
            raise UsageError(f"negatives: no {text_field!r} field (columns: {sorted(df.columns)})")
    texts = [df.select(F.col(text_field).cast("string").alias("text")) for df in frames]
    out = texts[0]
    for df in texts[1:]:
        out = out.unionByName(df)
    return out.where(F.col("text").isNotNull() & (F.length(F.trim("text")) > 0))


def sample_texts(df: DataFrame, n: int, seed: int = 0) -> tuple[Iterator[str], dict]:
    """A uniform random sample of at most ``n`` non-empty texts of ``df`` (column ``text``; rows a stage
    dropped left out), streamed to the driver in hash order, plus a description of how it was drawn."""
    text = F.col("text")
    kept = df.where(F.col(DROP_REASON).isNull()) if DROP_REASON in df.columns else df
    docs = kept.select(text).where(text.isNotNull() & (F.length(text) > 0))
    total = docs.count()
    # Keep a little more than n / total by rank, then the n lowest ranks: exactly n when total >= n.
    rank = F.pmod(F.xxhash64(F.lit(seed), text), F.lit(RANK_RANGE))
    cut = math.ceil(oversampled_fraction(n, total) * RANK_RANGE)
    sample = docs.select(text, rank.alias("_rank")).where(rank < F.lit(cut)).orderBy("_rank", "text").limit(n)
    return (row[0] for row in sample.toLocalIterator()), sample_info(total, n)
