"""Which Spark function runs each global stage: the map lives here, on the Spark side, so the stages
in ``dataprep`` never name the code that runs them on Spark.

Global runner contract: ``run(df, stage, ctx) -> DataFrame``. ``df`` holds the documents that are
still kept; the result has the same rows and columns plus any attribute columns the stage adds, plus
``drop_stage`` / ``drop_reason`` (string, null when the document is kept). Side outputs (token
shards, audit files) go under ``ctx.step_dir`` (a ``pipelines.steps.StepContext``). Nothing may be
collected on the driver in bulk.
"""

from __future__ import annotations

from typing import Callable

from dataprep.core.stage import GlobalStage
from dataprep.dedup.exact import ExactDedup
from dataprep.dedup.minhash import MinHashDedup
from dataprep.dedup.paragraphs import ParagraphDedup
from dataprep.dedup.urls import UrlDedup
from dataprep.quality.top_fraction import TopFraction
from dataprep.tokenize.stage import Tokenize
from pipelines.dedup import run_exact, run_minhash, run_url
from pipelines.paragraph_dedup import run_paragraph_dedup
from pipelines.token_shards import run_tokenize
from pipelines.top_fraction import run_top_fraction

# Stage class -> its Spark runner; a subclass runs on its parent's. Another package's global stage
# adds its own entry.
GLOBAL_RUNNERS: dict[type[GlobalStage], Callable] = {
    ExactDedup: run_exact,
    MinHashDedup: run_minhash,
    UrlDedup: run_url,
    ParagraphDedup: run_paragraph_dedup,
    Tokenize: run_tokenize,
    TopFraction: run_top_fraction,
}


def global_runner(stage: GlobalStage) -> Callable:
    """The Spark implementation of ``stage``: the entry of its class, or of the nearest class it derives from."""
    for cls in type(stage).__mro__:
        if cls in GLOBAL_RUNNERS:
            return GLOBAL_RUNNERS[cls]
    raise TypeError(f"global stage {stage.name!r} has no Spark runner (add its class to pipelines.global_runners.GLOBAL_RUNNERS)")
