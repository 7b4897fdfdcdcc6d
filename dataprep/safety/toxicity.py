"""Toxicity: a word-list score and a model score per document, then drop, trim or only annotate.

- ``toxicity_words``: flagged tokens / all tokens, with the list of the document's language (``lang``
  column from the langid stage; without it, all lists at once), matched per script after folding
  width, case and traditional/simplified forms (``dataprep.safety.word_lists``: whole words in spaced scripts,
  anywhere in CJK/Hangul/Thai, separators between characters ignored; a trie-shaped regex, so cost
  does not grow with list size). Each CJK character counts as a token. ``words_thresholds`` sets
  the density per language (lists ship for en, zh, ja, ko, ru, de, fr, es).
- ``toxicity_model``: a classifier's probability, scored per line (or sentence) and averaged weighted
  by length; ``toxicity_model_max`` is the worst unit. English uses the linear model shipped inside
  the ``alt-profanity-check`` wheel; any language can use a fastText model trained with
  ``dataprep train-classifier`` (``model: fasttext``).
- ``action``: ``drop`` documents above a threshold, ``remove_lines`` removes only the units above
  it (as Dolma does at 0.4), ``annotate`` keeps everything. Scores are stored in every case and are
  computed before any removal; ``toxicity_removed`` counts removed units. Null means "not scored".
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Literal

import pyarrow as pa
from pydantic import Field, model_validator

from dataprep.core.registry import register
from dataprep.core.stage import DocumentStage, with_column
from dataprep.core.storage import resolve_asset
from dataprep.safety.word_lists import ASSETS, WordList, lang_key, load_lists, word_list

DEFAULT_LISTS = ASSETS / "toxic_words"
_SENTENCE = re.compile(r"[^\n.!?。！？]*(?:[.!?]+(?=\s|$)|[。！？]+|\n|$)[^\S\n]*\n?")
ALL = "*"  # the union of every list, for documents without a language


@lru_cache(maxsize=8)
def load_word_lists(use_default: bool, extra: tuple[tuple[str, tuple[str, ...]], ...]) -> dict[str, WordList]:
    """Language -> WordList from the shipped lists plus extra files; ``ALL`` holds their union."""
    entries = load_lists(DEFAULT_LISTS, {lang: list(paths) for lang, paths in extra}, use_default)
    lists = {lang: word_list(e) for lang, e in entries.items()}
    lists[ALL] = word_list([w for e in entries.values() for w in e])
    return lists


@lru_cache(maxsize=4)
def _fasttext(path: str):
    from dataprep.classify.fasttext_classifier import FastTextClassifier

    return FastTextClassifier.load(path)


def split_units(text: str, unit: str) -> list[str]:
    """Lines or sentences, each keeping its trailing whitespace, so that joining them gives ``text``."""
    if unit == "line":
        return text.splitlines(keepends=True)
    return [u for u in _SENTENCE.findall(text) if u]


@register("toxicity")
class ToxicityFilter(DocumentStage):
    """Score toxicity with word lists and a classifier; drop, trim or annotate."""

    action: Literal["drop", "remove_lines", "annotate"] = "drop"
    unit: Literal["line", "sentence"] = "line"  # what remove_lines removes and the model scores
    words_threshold: float | None = Field(
        0.02, ge=0, le=1, description="flagged-token fraction above which to act; null: never"
    )
    words_thresholds: dict[str, float] = Field(
        default_factory=dict, description="per-language overrides of words_threshold"
    )
    model: Literal["profanity_check", "fasttext", "none"] = "profanity_check"
    model_path: str | None = None  # fastText model from `dataprep train-classifier`
    model_label: str = "toxic"  # the fastText label whose probability is the score
    model_languages: list[str] | None = Field(
        None, description="languages the model scores; default: en for profanity_check, all for fasttext"
    )
    model_threshold: float | None = Field(
        0.8, ge=0, le=1, description="model probability above which to act; null: never"
    )
    use_default_lists: bool = True
    word_lists: dict[str, list[str]] = Field(default_factory=dict, description="extra list files per language code")
    lang_column: str = "lang"

    @model_validator(mode="after")
    def _check_model(self) -> "ToxicityFilter":
        if self.model == "fasttext" and not self.model_path:
            raise ValueError("model: fasttext needs model_path (train one with `dataprep train-classifier`)")
        return self

    def check_assets(self) -> None:
        if self.model == "fasttext":
            _fasttext(self.model_path)

    def asset_paths(self) -> list[str]:
        extra = [p for paths in self.word_lists.values() for p in paths]
        return ([self.model_path] if self.model == "fasttext" and self.model_path else []) + extra

    def output_fields(self) -> list[pa.Field]:
        floats = [pa.field(c, pa.float64()) for c in ("toxicity_words", "toxicity_model", "toxicity_model_max")]
        return floats + [pa.field("toxicity_removed", pa.int32())]

    # -- scoring -------------------------------------------------------------------------------

    def _model_languages(self) -> set[str] | None:
        if self.model_languages is not None:
            return {lang_key(lang) for lang in self.model_languages}
        return {"en"} if self.model == "profanity_check" else None

    def _predict(self, units: list[str]) -> list[float]:
        if not units:
            return []
        if self.model == "profanity_check":
            from profanity_check import predict_prob  # loads the model once per process (~2 s)

            return [float(p) for p in predict_prob(units)]
        return _fasttext(resolve_asset(self.model_path)).score(units, self.model_label)

    def process(self, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
        lists = load_word_lists(
            self.use_default_lists, tuple((k, tuple(v)) for k, v in sorted(self.word_lists.items()))
        )
        texts = [t or "" for t in batch.column("text").to_pylist()]
        if self.lang_column in batch.column_names:
            langs = [lang_key(x) if x else ALL for x in batch.column(self.lang_column).to_pylist()]
        else:
            langs = [ALL] * len(texts)
        model_langs = self._model_languages()
        units = [split_units(t, self.unit) for t in texts]
        # one model call for every unit of the batch that needs a score
        applies = [
            self.model != "none" and (model_langs is None or lang in model_langs or lang == ALL) for lang in langs
        ]
        to_score, owners = [], []
        for i, doc_units in enumerate(units):
            if applies[i]:
                for j, u in enumerate(doc_units):
                    if u.strip():
                        to_score.append(u.strip())
                        owners.append((i, j))
        unit_probs: dict[tuple[int, int], float] = dict(zip(owners, self._predict(to_score)))
        scored_docs = {i for i, _ in owners}

        cols = {"toxicity_words": [], "toxicity_model": [], "toxicity_model_max": [], "toxicity_removed": []}
        new_texts, reasons = [], []
        for i, (text, doc_units, lang) in enumerate(zip(texts, units, langs)):
            wl = lists.get(lang)
            counts = [wl.count(u) for u in doc_units] if wl else [(0, 0)] * len(doc_units)
            flagged, total = sum(c[0] for c in counts), sum(c[1] for c in counts)
            words_score = flagged / total if wl and total else (0.0 if wl else None)
            probs = [unit_probs.get((i, j)) for j in range(len(doc_units))]
            weights = [len(u.strip()) if p is not None else 0 for u, p in zip(doc_units, probs)]
            if i in scored_docs:
                model_score = sum(w * p for w, p in zip(weights, probs) if p is not None) / max(1, sum(weights))
                model_max = max(p for p in probs if p is not None)
            else:  # 0.0: the model applies but the text is blank; None: the model does not apply
                model_score = model_max = 0.0 if applies[i] else None
            removed, reason = 0, None
            words_threshold = self.words_thresholds.get(lang, self.words_threshold)
            if self.action == "drop":
                if self._over(words_score, words_threshold):
                    reason = "toxicity:words"
                elif self._over(model_score, self.model_threshold):
                    reason = "toxicity:model"
            elif self.action == "remove_lines":
                kept = []
                for u, (f, n), p in zip(doc_units, counts, probs):
                    if self._over(f / n if n else None, words_threshold) or self._over(p, self.model_threshold):
                        removed += 1
                    else:
                        kept.append(u)
                if removed and not "".join(kept).strip():
                    reason = "toxicity:all_removed"  # dropped with its original text, for audit
                elif removed:
                    text = "".join(kept)
            new_texts.append(text)
            reasons.append(reason)
            for name, value in zip(cols, (words_score, model_score, model_max, removed)):
                cols[name].append(value)
        if any(cols["toxicity_removed"]):
            batch = with_column(batch, "text", new_texts, pa.string())
        for name, values in cols.items():
            batch = with_column(batch, name, values, pa.int32() if name == "toxicity_removed" else pa.float64())
        return batch, reasons

    @staticmethod
    def _over(score: float | None, threshold: float | None) -> bool:
        return score is not None and threshold is not None and score > threshold
