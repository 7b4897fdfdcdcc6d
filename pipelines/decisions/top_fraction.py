"""The Spark decision of ``top_fraction`` (``dataprep.quality.top_fraction``).

Only the (group, score) pairs are scanned for the cut-offs: one count per group, then Spark's
``approxQuantile`` per group (exact below the stage's ``exact_below``), so nothing but the cut-offs
reaches the driver. Each task then drops its documents at or below their group's cut-off
(``dataprep.quality.top_fraction.CutBelow``).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import NumericType

from dataprep.core.errors import UsageError
from dataprep.quality.top_fraction import ALL, TopFraction
from pipelines.decisions.shared import materialize


def _cutoffs(scored: DataFrame, stage: TopFraction) -> tuple[dict[str, float | None], dict[str, float]]:
    """Cut-off and relative error of each group with scored documents."""
    counts = {row.group: row["count"] for row in scored.groupBy("group").count().collect()}
    cutoffs, errors = {}, {}
    for group, n in sorted(counts.items()):
        errors[group] = stage.error_for(n)
        rows = scored.where(F.col("group") == group)
        cutoffs[group] = rows.approxQuantile("score", [stage.quantile], errors[group])[0] if stage.keep < 1 else None
    return cutoffs, errors


def score_group(stage: TopFraction):
    """The column that groups documents for their cut-off: their language, or one group of all."""
    return F.coalesce(F.col(stage.lang_column).cast("string"), F.lit("")) if stage.by_language else F.lit(ALL)


def top_fraction_cutoffs(df: DataFrame, stage: TopFraction) -> dict[str, float | None]:
    """Each group's cut-off (None: keep the whole group), noted on the stage; given cut-offs are checked
    to name every group that has scores."""
    stage.check_columns(df.columns)
    if not isinstance(df.schema[stage.score].dataType, NumericType):
        raise UsageError(
            f"top_fraction: {stage.score!r} is {df.schema[stage.score].dataType.simpleString()}, not a number"
        )
    if stage.by_language and stage.lang_column not in df.columns:
        raise UsageError(f"top_fraction: by_language needs a {stage.lang_column!r} column (run langid first)")
    score = F.col(stage.score).cast("double")
    scored = df.select(score_group(stage).alias("group"), score.alias("score")).where(
        F.col("score").isNotNull() & ~F.isnan("score")
    )
    if stage.cutoffs is not None:
        cutoffs, errors = dict(stage.cutoffs), {}
        # a group the given cut-offs do not name: fail rather than keep it all
        strays = scored.where(~F.col("group").isin(list(cutoffs))).select("group").distinct().limit(5).collect()
        if strays:
            raise UsageError(
                f"top_fraction: no cut-off for group(s) {sorted(r.group for r in strays)} (cutoffs name "
                f"{sorted(cutoffs)})"
            )
    else:
        cutoffs, errors = _cutoffs(materialize(scored), stage)
    stage.record(cutoffs, errors)
    return cutoffs


def decide(df: DataFrame, stage: TopFraction, ctx=None) -> tuple[None, dict]:
    return None, {"cutoffs": top_fraction_cutoffs(df, stage)}
