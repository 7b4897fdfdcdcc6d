"""SentencePiece trained on a uniform sample of a cleaned corpus.

The sample is drawn with Spark by hashing each text (xxhash64 with the seed) and keeping the lowest
hashes: every document is equally likely, and the same corpus gives the same sample however it is
partitioned, so the sample's SHA-256 in ``tokenizer_meta.json`` is reproducible. The ``tokenize``
stage calls ``train_from_dataframe`` when its tokenizer does not exist yet.
"""

from __future__ import annotations

import math
from typing import Iterator

from dataprep.core.storage import expand_inputs
from dataprep.tokenize.stage import TokenizerTraining
from dataprep.tokenize.tokenizer import Tokenizer

_HASH_RANGE = 10**9


def sample_texts(df, n: int, seed: int = 0) -> tuple[Iterator[str], dict]:
    """A uniform random sample of at most ``n`` non-empty texts of ``df`` (column ``text``), streamed
    to the driver in hash order, plus a description of how it was drawn."""
    from pyspark.sql import functions as F

    text = F.col("text")
    docs = df.select(text).where(text.isNotNull() & (F.length(text) > 0))
    total = docs.count()
    # Keep a little more than n / total by hash, then the n lowest hashes: exactly n when total >= n.
    fraction = min(1.0, (n + 5 * math.sqrt(n) + 10) / max(total, 1))
    h = F.pmod(F.xxhash64(F.lit(seed), text), F.lit(_HASH_RANGE))
    sample = docs.select(text, h.alias("_h")).where(h < F.lit(math.ceil(fraction * _HASH_RANGE))).orderBy("_h", "text").limit(n)
    info = {"corpus_documents": total, "sample_fraction": round(min(1.0, n / max(total, 1)), 6), "sampler": "xxhash64"}
    return (row[0] for row in sample.toLocalIterator()), info


def train_from_dataframe(df, output_dir: str, training: TokenizerTraining) -> Tokenizer:
    """Draw the sample from ``df`` with Spark and train the tokenizer into ``output_dir``."""
    texts, info = sample_texts(df, training.sample_documents, training.seed)
    return training.train(texts, output_dir, extra_meta=info)


def text_dataframe(spark, inputs: list[str], fmt: str = "auto", text_field: str = "text"):
    """Parquet (pipeline output) or JSON Lines documents as a DataFrame with a ``text`` column."""
    files = expand_inputs(inputs)
    if fmt == "auto":
        if all(f.endswith(".parquet") for f in files):
            fmt = "parquet"
        elif all(f.endswith((".jsonl", ".json", ".jsonl.gz", ".json.gz")) for f in files):
            fmt = "jsonl"
        else:
            raise ValueError(f"cannot tell the input format of {files[0]!r}...; pass --format parquet or jsonl")
    df = spark.read.parquet(*files) if fmt == "parquet" else spark.read.json(files)
    if text_field not in df.columns:
        raise ValueError(f"input has no {text_field!r} column (columns: {', '.join(df.columns)}); set --text-field")
    return df.withColumnRenamed(text_field, "text") if text_field != "text" else df
