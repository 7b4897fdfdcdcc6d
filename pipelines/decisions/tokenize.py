"""The Spark decision of ``tokenize`` (``dataprep.tokenize.stage``): the tokenizer, trained once on
Spark's draw of the shared sample when asked and missing, and the shards folder the tasks write into."""

from __future__ import annotations

from pyspark.sql import DataFrame

from dataprep.tokenize.stage import Tokenize
from dataprep.tokenize.tokenizer import Tokenizer, tokenizer_exists
from pipelines.train_tokenizer import train_from_dataframe


def stage_tokenizer(df, stage: Tokenize) -> Tokenizer:
    """The ``tokenize`` stage's tokenizer; trained first on Spark's draw of the sample of ``df`` when
    asked and missing (the same sample the in-memory runner draws)."""
    if stage.train is not None and not tokenizer_exists(stage.tokenizer_dir):
        return train_from_dataframe(df, stage.tokenizer_dir, stage.train)
    return stage.load_tokenizer()


def decide(df: DataFrame, stage: Tokenize, ctx=None) -> tuple[None, dict]:
    stage_tokenizer(df, stage)
    return None, stage.begin_shards(stage.shards_folder(ctx.step_dir if ctx is not None else None))
