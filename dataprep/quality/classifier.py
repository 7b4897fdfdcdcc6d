"""DCLM-style quality classifier stage: a fastText model trained with ``dataprep train-classifier`` on
examples of text you want more of (e.g. label ``hq``) and text you do not; every document gets the
probability of the positive label, and documents below ``threshold`` are dropped. Without a model_path
it uses the model shipped in dataprep/assets/quality (``hq`` prose vs ``boilerplate``; see its README).
``model_paths`` gives some languages their own model (``train-classifier --languages`` trains them);
the others use ``model_path``."""

from __future__ import annotations

import os
from functools import lru_cache

import pyarrow as pa
from pydantic import Field, field_validator

from dataprep.classify.fasttext_classifier import FastTextClassifier
from dataprep.core.errors import UsageError
from dataprep.core.registry import register
from dataprep.core.stage import DocumentStage, with_column
from dataprep.core.storage import resolve_asset

DEFAULT_MODEL = os.path.join(os.path.dirname(os.path.dirname(__file__)), "assets", "quality", "page_quality.bin")


@lru_cache(maxsize=8)
def _load(path: str) -> FastTextClassifier:
    return FastTextClassifier.load(path)


@register("quality_classifier")
class QualityClassifier(DocumentStage):
    """Adds a fastText classifier's probability of ``label`` as ``score_column``; optionally drops low scores."""

    model_path: str | None = Field(
        None, description="fastText model; null: the shipped page-quality model (hq vs boilerplate)"
    )
    label: str = Field("hq", description="the positive label whose probability is the score")
    threshold: float | None = Field(None, ge=0, le=1, description="drop documents scoring below it; null keeps all")
    score_column: str = "quality_score"
    model_paths: dict[str, str] = Field(
        {}, description="language -> its own fastText model; other languages use model_path"
    )
    lang_column: str = "lang"

    @field_validator("model_path")
    @classmethod
    def _exists(cls, path: str | None) -> str | None:
        if path is not None and not os.path.isfile(path):
            raise ValueError(f"classifier model {path!r} does not exist (train one with dataprep train-classifier)")
        return path

    @field_validator("model_paths")
    @classmethod
    def _all_exist(cls, paths: dict[str, str]) -> dict[str, str]:
        for path in paths.values():
            cls._exists(path)
        return paths

    def output_fields(self) -> list[pa.Field]:
        return [pa.field(self.score_column, pa.float64())]

    def check_assets(self) -> None:
        for path in [self.model_path or DEFAULT_MODEL, *self.model_paths.values()]:
            _load(path)

    def asset_paths(self) -> list[str]:
        own = [self.model_path] if self.model_path else []  # the default ships inside the package
        return own + sorted(set(self.model_paths.values()))

    def process(self, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
        default = resolve_asset(self.model_path) if self.model_path else DEFAULT_MODEL
        texts = batch.column("text").to_pylist()
        if self.model_paths:
            if self.lang_column not in batch.column_names:
                raise UsageError(
                    f"quality_classifier: model_paths needs a {self.lang_column!r} column (run langid first)"
                )
            paths = [
                resolve_asset(self.model_paths[lang]) if lang in self.model_paths else default
                for lang in batch.column(self.lang_column).to_pylist()
            ]
        else:
            paths = [default] * len(texts)
        scores = [0.0] * len(texts)
        for path in sorted(set(paths)):
            rows = [i for i, p in enumerate(paths) if p == path]
            for i, score in zip(rows, _load(path).score([texts[i] for i in rows], self.label)):
                scores[i] = score
        batch = with_column(batch, self.score_column, scores, pa.float64())
        low = self.threshold
        return batch, [None if low is None or s >= low else "quality_score_below_threshold" for s in scores]
