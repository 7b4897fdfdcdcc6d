"""Stage ``langid``: fastText language identification (lid.176 by default, or GlotLID), as FineWeb.

The default model is ``lid.176.ftz``, shipped inside this package (``dataprep/assets/langid``, CC BY-SA
3.0, see the NOTICE beside it), so a plain install can identify languages. The model is loaded
once per process and cached at module level, so the stage pickles small for Spark executors and
each executor loads the model on its first batch. The default path is found where the task runs (in
that executor's installed package), a configured one through ``resolve_asset`` (shipped with the job).

``load_config`` loads the model and rejects language codes it cannot emit (``EN``, ``zh-CN``,
``english``), with the closest labels it has. With ``languages: []`` every document is kept and only
labelled.
"""

from __future__ import annotations

import difflib
import functools
import os

import pyarrow as pa
from pydantic import Field, model_validator

from dataprep.io import resolve_asset
from dataprep.stage import DocumentStage, register, with_column

LABEL_PREFIX = "__label__"


def default_model_path() -> str:
    """``lid.176.ftz`` shipped in dataprep's assets (where this module is installed)."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "assets", "langid", "lid.176.ftz")


@functools.lru_cache(maxsize=4)
def load_model(path: str):
    """Load a fastText model once per process (per path)."""
    import fasttext

    try:
        return fasttext.load_model(path)
    except ValueError as exc:  # fasttext reports unreadable or missing files as ValueError
        raise ValueError(f"fasttext cannot load the language ID model {path!r}: {exc}") from None


def model_labels(path: str | None = None) -> frozenset[str]:
    """The language codes a model can emit (lid.176: ISO 639 codes such as en, zh, pt, ceb)."""
    model = load_model(path or default_model_path())
    return frozenset(label.removeprefix(LABEL_PREFIX) for label in model.get_labels())


def check_languages(codes, labels: frozenset[str], where: str) -> None:
    """ValueError for a code the model never emits, with the labels it probably meant."""
    for code in codes:
        if code in labels:
            continue
        base = code.replace("_", "-").split("-")[0].lower()
        guesses = [lab for lab in dict.fromkeys((base, base[:2], base[:3])) if lab in labels]
        guesses = guesses or difflib.get_close_matches(code.lower(), sorted(labels), n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(repr(g) for g in guesses[:3])}?" if guesses else ""
        raise ValueError(f"{where}: {code!r} is not a language the model can emit (it has {len(labels)} labels such as en, de, zh){hint}")


@register("langid")
class LanguageID(DocumentStage):
    """Adds ``lang`` and ``lang_score`` (the top label and its probability); drops ``langid:<lang>``
    for languages not in ``languages`` and ``langid:low_score`` below the language's threshold."""

    model_path: str | None = None  # None: the lid.176.ftz shipped in this package, found where the task runs
    languages: list[str] = Field(default_factory=list)  # model labels without __label__; empty: keep all, label only
    threshold: float = Field(0.65, ge=0.0, le=1.0)  # FineWeb's value for English (not applied when languages is empty)
    thresholds: dict[str, float] = Field(default_factory=dict)  # per-language overrides

    @model_validator(mode="after")
    def _check(self) -> "LanguageID":
        path = self.model_path or default_model_path()
        if not os.path.isfile(path):
            raise ValueError(f"language ID model not found: {path}")
        for lang, value in self.thresholds.items():
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"thresholds.{lang}: {value} is not between 0 and 1")
        return self

    def check_assets(self) -> None:
        labels = model_labels(self.model_path)
        check_languages(self.languages, labels, "languages")
        check_languages(self.thresholds, labels, "thresholds")

    def asset_paths(self) -> list[str]:
        return [self.model_path] if self.model_path else []

    def _model(self):
        return load_model(resolve_asset(self.model_path) if self.model_path else default_model_path())

    def output_fields(self) -> list[pa.Field]:
        return [pa.field("lang", pa.string()), pa.field("lang_score", pa.float32())]

    def predict(self, texts: list[str]) -> tuple[list[str | None], list[float]]:
        """Top language and probability per text (None, 0.0 for empty text)."""
        model = self._model()
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
            if not wanted:  # no language chosen: label every document, drop none
                reasons.append(None)
            elif lang is not None and lang not in wanted:
                reasons.append(f"langid:{lang}")
            elif lang is None or score < self.thresholds.get(lang, self.threshold):
                reasons.append("langid:low_score")
            else:
                reasons.append(None)
        batch = with_column(batch, "lang", langs, pa.string())
        return with_column(batch, "lang_score", scores, pa.float32()), reasons
