"""Keep the top fraction of the corpus by a score column (DCLM keeps the top ~10% by its classifier):
a fixed threshold keeps a different share on every crawl and language, a fraction does not.

The cut-off of a group (the corpus, or one language) is the score at rank ``ceil((1 - keep) * n)``
of its ``n`` scored documents in ascending order, the rank Spark's ``approxQuantile`` returns;
documents scoring strictly above it are kept, so ties at the cut-off leave together and at most
``keep`` of a group is kept. Documents without a score are dropped as ``top_fraction_no_score``.

On Spark the quantile is exact (relative error 0) for groups of up to ``exact_below`` documents and
within ``relative_error`` above that: the kept count is then ``keep * n`` give or take
``relative_error * n``. The cut-offs applied go to stats.json (``notes``); setting ``cutoffs`` to
them makes a rerun keep exactly the same documents whatever the partitioning.
"""

from __future__ import annotations

import math

import pyarrow as pa
from pydantic import Field, model_validator

from dataprep.core.applier import Applier
from dataprep.core.errors import UsageError
from dataprep.core.registry import register
from dataprep.core.stage import GlobalStage

REASON = "below_top_fraction"
NO_SCORE = "top_fraction_no_score"
ALL = "*"  # the group name of the whole corpus when not split by language


@register("top_fraction")
class TopFraction(GlobalStage):
    """Keep the ``keep`` share of documents with the highest ``score``, corpus-wide or per language."""

    score: str = Field(..., description="numeric column to rank by, e.g. quality_score from quality_classifier")
    keep: float = Field(..., gt=0, le=1, description="share of each group's scored documents to keep")
    by_language: bool = Field(False, description="one cut-off per value of lang_column instead of one for the corpus")
    lang_column: str = "lang"
    relative_error: float = Field(
        0.001, gt=0, lt=0.1, description="Spark: quantile error on groups larger than exact_below"
    )
    exact_below: int = Field(
        100_000, ge=0, description="Spark: groups up to this many documents get the exact quantile"
    )
    cutoffs: dict[str, float] | None = Field(
        None, description='cut-offs from an earlier run\'s stats.json ({"*": x} or per language) applied as they are'
    )

    @model_validator(mode="after")
    def _check_cutoffs(self) -> "TopFraction":
        if self.cutoffs is not None and not self.by_language and set(self.cutoffs) != {ALL}:
            raise ValueError(
                f'top_fraction: without by_language, cutoffs must be {{"{ALL}": value}}, got {sorted(self.cutoffs)}'
            )
        return self

    @property
    def quantile(self) -> float:
        """The probability whose quantile is the cut-off."""
        return 1.0 - self.keep

    def error_for(self, documents: int) -> float:
        """The relative error Spark uses for a group of ``documents`` scored documents."""
        return 0.0 if documents <= self.exact_below else self.relative_error

    def cutoff_of(self, scores: list[float]) -> float | None:
        """The exact cut-off of one group (None keeps all of it); the reference the Spark run matches."""
        rank = math.ceil(self.quantile * len(scores)) - 1
        return sorted(scores)[rank] if scores and rank >= 0 else None

    def reasons(self, scores: list, groups: list[str], cutoffs: dict[str, float | None]) -> list[str | None]:
        """Why each document is dropped (None: kept) under the given per-group cut-offs."""
        out = []
        for score, group in zip(scores, groups):
            if score is None or (isinstance(score, float) and math.isnan(score)):
                out.append(NO_SCORE)
            elif group not in cutoffs:
                raise UsageError(f"top_fraction: no cut-off for group {group!r} (cutoffs name {sorted(cutoffs)})")
            else:
                cut = cutoffs[group]
                out.append(None if cut is None or score > cut else REASON)
        return out

    def groups(self, table: pa.Table) -> list[str]:
        if not self.by_language:
            return [ALL] * table.num_rows
        if self.lang_column not in table.column_names:
            raise UsageError(f"top_fraction: by_language needs a {self.lang_column!r} column (run langid first)")
        return [str(lang) if lang is not None else "" for lang in table.column(self.lang_column).to_pylist()]

    def check_columns(self, columns: list[str]) -> None:
        if self.score not in columns:
            raise UsageError(f"top_fraction: no {self.score!r} column to rank by (columns: {sorted(columns)})")

    def check_type(self, table: pa.Table) -> None:
        kind = table.schema.field(self.score).type
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_null(kind)):
            raise UsageError(f"top_fraction: {self.score!r} is {kind}, not a number")

    def record(self, cutoffs: dict[str, float | None], errors: dict[str, float]) -> None:
        """Note the cut-offs applied and the relative error of each (stats.json)."""
        self.note("cutoffs", {g: cutoffs[g] for g in sorted(cutoffs)})
        self.note("relative_error", {g: errors.get(g, 0.0) for g in sorted(cutoffs)})

    def decide(self, prepared: None, documents: pa.Table) -> tuple[None, dict]:
        """The exact cut-off of each group (or the given ones). Spark's form, with its quantile sketch
        above ``exact_below``, is ``pipelines.decisions.top_fraction.top_fraction_cutoffs``."""
        self.check_columns(documents.column_names)
        self.check_type(documents)
        if self.cutoffs is not None:
            cutoffs = dict(self.cutoffs)
        else:
            by_group: dict[str, list[float]] = {}
            for score, group in zip(documents.column(self.score).to_pylist(), self.groups(documents)):
                if score is not None and not math.isnan(score):
                    by_group.setdefault(group, []).append(float(score))
            cutoffs = {g: self.cutoff_of(s) for g, s in by_group.items()}
        self.record(cutoffs, {})
        return None, {"cutoffs": cutoffs}

    def applier(self, state: dict) -> "CutBelow":
        return CutBelow(self, state["cutoffs"])


class CutBelow(Applier):
    """Drops each document of a task at or below its group's cut-off (found over the whole corpus)."""

    def __init__(self, stage: TopFraction, cutoffs: dict[str, float | None]):
        super().__init__(stage.name)
        self.rules, self.cutoffs = stage, cutoffs

    def process(self, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
        return batch, self.rules.reasons(
            batch.column(self.rules.score).to_pylist(), self.rules.groups(batch), self.cutoffs
        )
