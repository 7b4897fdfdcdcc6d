"""SentencePiece trained on a uniform sample of a cleaned corpus.

The sample is ``pipelines.sample_texts``'s: the same corpus gives the same sample however it is
partitioned, so the sample's SHA-256 in ``tokenizer_meta.json`` is reproducible. The ``tokenize``
stage's Spark decision (``pipelines.decisions.tokenize``) trains with it too.
"""

from __future__ import annotations

from dataprep.core.errors import UsageError
from dataprep.core.inputs import expand_inputs
from dataprep.tokenize.stage import TokenizerTraining
from dataprep.tokenize.tokenizer import Tokenizer
from pipelines.sample_texts import sample_texts


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
            raise UsageError(f"cannot tell the input format of {files[0]!r}...; pass --format parquet or jsonl")
    df = spark.read.parquet(*files) if fmt == "parquet" else spark.read.json(files)
    if text_field not in df.columns:
        raise UsageError(f"input has no {text_field!r} column (columns: {', '.join(df.columns)}); set --text-field")
    return df.withColumnRenamed(text_field, "text") if text_field != "text" else df
