"""Stage ``langid``: fastText language identification (lid.176 by default, or GlotLID), as FineWeb.

The default model is ``lid.176.ftz``, shipped inside this package (``dataprep/assets/langid``, CC BY-SA
3.0, see the NOTICE beside it), so a plain install can identify languages. The model is loaded
once per process and cached at module level, so the stage pickles small for Spark executors and
each executor loads the model on its first batch. The default path is found where the task runs (in
that executor's installed package), a configured one through ``resolve_asset`` (shipped with the job).

``load_config`` loads the model and rejects language codes it cannot emit (``EN``, ``zh-CN``,
``english``), with the closest labels it has. With ``languages: []`` every document is kept and only
labelled.

``second_opinion`` makes it an ensemble with lingua (``lingua-language-detector``, a wheel with its
n-gram models inside, 75 languages, among them the Bantu languages lid.176 lacks): texts that lid.176
labels with a probability under ``ask_below``, texts shorter than ``ask_chars`` and texts with a label in
``ask_labels`` (``no``: it cannot tell Bokmål from Nynorsk; ``en``: it calls Bantu languages English) go
to lingua, which then decides among its languages; its confidence becomes ``lang_score``. lid.176 keeps
the languages lingua does not know, and lingua may not call a text English that lid.176 gave another
language with probability >= 0.5 when a fifth or more of its letters are not Latin (lingua reads the
Latin part of an Urdu sentence behind an English HTTP header as English), nor where lid.176 gives English
under ``english_support`` (names, titles and mixed sentences that lingua's trigrams call English; the
English gate's precision rests on both detectors agreeing). A text of ``trust_english_chars`` (500) or more
that lid.176 calls English with probability >= ``ask_below`` is not asked: lid.176 mistakes other languages for
English on sentences, not on pages, and English is most of a crawl. Only the middle
``ask_max_chars`` characters go to lingua (a page's start and end are mostly navigation), so its cost
stays bounded on long pages. ``auto`` (the default) uses lingua where it is installed (the ``data``
extra brings it) and logs which way it went; that choice is made where the stage is built (the driver) and
travels with it, so an executor without lingua fails with the cause instead of labelling differently. ``lingua_accuracy:
low`` (the default) reads trigrams only; ``high`` reads short texts by 1- to 5-grams, more accurate on sentences but up
to ~1.4 GB per Python worker once a short text arrives, more than a YARN container's default memory overhead.

fastText itself reads the middle ``max_chars`` (3000) characters of a text, as its cost grows with the
length; on real long pages its labels agree with the whole text's. ``max_chars: null`` reads all of it,
as FineWeb (whose preset pins it).
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import logging
import os
from typing import Literal

import pyarrow as pa
import regex
from pydantic import Field, PrivateAttr, model_validator

from dataprep.core.errors import UsageError
from dataprep.core.registry import register
from dataprep.core.stage import DocumentStage, with_column
from dataprep.core.storage import resolve_asset

LABEL_PREFIX = "__label__"
ENGLISH_MIN_LATIN = 0.8  # lingua may relabel a text as English only if this share of its letters is Latin
SUPPORT_LABELS = 10  # how many of lid.176's labels are read to find its probability for English
_LATIN = regex.compile(r"\p{Latin}")
_LETTER = regex.compile(r"\p{L}")

log = logging.getLogger(__name__)


def default_model_path() -> str:
    """``lid.176.ftz`` shipped in dataprep's assets (where this module is installed)."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "assets", "langid", "lid.176.ftz")


@functools.lru_cache(maxsize=4)
def load_model(path: str):
    """Load a fastText model once per process (per path)."""
    import fasttext

    try:
        return fasttext.load_model(path)
    except ValueError as exc:  # fasttext reports unreadable or missing files as ValueError
        raise UsageError(f"fasttext cannot load the language ID model {path!r}: {exc}") from None


def model_labels(path: str | None = None, second_opinion: str = "none") -> frozenset[str]:
    """The language codes a model can emit (lid.176: ISO 639 codes such as en, zh, pt, ceb), with
    lingua's when it gives a second opinion."""
    model = load_model(path or default_model_path())
    labels = frozenset(label.removeprefix(LABEL_PREFIX) for label in model.get_labels())
    return labels | frozenset(lingua_codes().values()) if uses_lingua(second_opinion) else labels


@functools.lru_cache(maxsize=1)
def lingua_installed() -> bool:
    """Looked up once per process: ``predict`` asks on every batch."""
    return importlib.util.find_spec("lingua") is not None


def uses_lingua(second_opinion: str) -> bool:
    """Whether lingua gives its second opinion in this process (``auto``: when it is installed)."""
    return second_opinion == "lingua" or (second_opinion == "auto" and lingua_installed())


@functools.lru_cache(maxsize=2)
def lingua_detector(accuracy: str = "high"):
    """lingua over all its languages, built once per process (its models load on first use);
    ``low`` reads trigrams only."""
    try:
        from lingua import LanguageDetectorBuilder
    except ImportError:
        raise ImportError(
            "second_opinion: lingua needs lingua-language-detector (pip install 'ccpretrain[data]')"
        ) from None
    builder = LanguageDetectorBuilder.from_all_languages()
    return (builder.with_low_accuracy_mode() if accuracy == "low" else builder).build()


def middle(line: str, chars: int | None) -> str:
    """The middle ``chars`` characters of ``line`` (all of it for None): a page's start and end are
    mostly navigation."""
    if chars is None or len(line) <= chars:
        return line
    start = (len(line) - chars) // 2
    return line[start : start + chars]


def latin_share(text: str) -> float:
    """Share of the letters in ``text`` that are Latin (1.0 without letters)."""
    letters = len(_LETTER.findall(text))
    return len(_LATIN.findall(text)) / letters if letters else 1.0


@functools.lru_cache(maxsize=1)
def lingua_codes() -> dict:
    """lingua Language -> ISO 639-1 code as lid.176 writes it."""
    from lingua import Language

    return {lang: lang.iso_code_639_1.name.lower() for lang in Language.all()}


def check_languages(codes, labels: frozenset[str], where: str) -> None:
    """ValueError for a code the model never emits, with the labels it probably meant."""
    for code in codes:
        if code in labels:
            continue
        base = code.replace("_", "-").split("-")[0].lower()
        guesses = [lab for lab in dict.fromkeys((base, base[:2], base[:3])) if lab in labels]
        guesses = guesses or difflib.get_close_matches(code.lower(), sorted(labels), n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(repr(g) for g in guesses[:3])}?" if guesses else ""
        raise UsageError(
            f"{where}: {code!r} is not a language the model can emit (it has {len(labels)} labels such as "
            f"en, de, zh){hint}"
        )


@register("langid")
class LanguageID(DocumentStage):
    """Adds ``lang`` and ``lang_score`` (the top label and its probability); drops ``langid:<lang>``
    for languages not in ``languages`` and ``langid:low_score`` below the language's threshold."""

    model_path: str | None = None  # None: the lid.176.ftz shipped in this package, found where the task runs
    languages: list[str] = Field(default_factory=list)  # model labels without __label__; empty: keep all, label only
    threshold: float = Field(0.65, ge=0.0, le=1.0)  # FineWeb's value for English (not applied when languages is empty)
    thresholds: dict[str, float] = Field(default_factory=dict)  # per-language overrides
    max_chars: int | None = Field(
        3000,
        ge=1,
        description="characters fastText reads from a text (the middle ones; its cost grows with length); null: the "
        "whole text, as FineWeb",
    )
    second_opinion: Literal["auto", "none", "lingua"] = (
        "auto"  # lingua decides short and uncertain texts; auto: if installed
    )
    lingua_accuracy: Literal["high", "low"] = "low"  # high: 1- to 5-grams on short texts, up to ~1.4 GB per worker
    ask_below: float = Field(0.9, ge=0.0, le=1.0)  # lid.176 probability under which lingua decides
    ask_chars: int = Field(0, ge=0)  # texts shorter than this always go to lingua
    ask_max_chars: int = Field(400, ge=1)  # characters lingua reads from a text
    ask_labels: list[str] = Field(
        ["no", "en"],
        description="lid.176 labels lingua always checks (no: Bokmål or Nynorsk; "
        "en: the gate most pipelines filter on)",
    )
    english_support: float = Field(
        0.3,
        ge=0.0,
        le=1.0,
        description="lingua may relabel a text as English only where lid.176 gives English at least this probability",
    )
    trust_english_chars: int | None = Field(
        500,
        ge=1,
        description="texts this long that lid.176 calls English with probability >= ask_below are "
        "not sent to lingua (it errs on short texts, not pages); null: always ask",
    )
    # Whether lingua decides, fixed where the stage is built (the driver) and pickled with it, so every
    # executor labels as the driver said it would (``auto`` must not resolve per process).
    _lingua: bool = PrivateAttr(False)

    @model_validator(mode="after")
    def _check(self) -> "LanguageID":
        path = self.model_path or default_model_path()
        if not os.path.isfile(path):
            raise ValueError(f"language ID model not found: {path}")
        for lang, value in self.thresholds.items():
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"thresholds.{lang}: {value} is not between 0 and 1")
        self._lingua = uses_lingua(self.second_opinion)
        return self

    def check_assets(self) -> None:
        if self.second_opinion == "auto":
            if lingua_installed():
                log.info(
                    "langid: second_opinion auto -> lingua (%s accuracy) decides uncertain, short and "
                    "%s-labelled texts",
                    self.lingua_accuracy,
                    "/".join(self.ask_labels),
                )
            else:
                log.info(
                    "langid: second_opinion auto -> lid.176 alone (lingua-language-detector is not "
                    "installed: pip install 'ccpretrain[data]')"
                )
        labels = model_labels(self.model_path, self.second_opinion)
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
            labels, probs = model.predict([middle(lines[i], self.max_chars) for i in present], k=1)
            for i, label, prob in zip(present, labels, probs):
                langs[i] = label[0].removeprefix(LABEL_PREFIX)
                scores[i] = min(float(prob[0]), 1.0)
        if self._lingua:
            if not lingua_installed():
                raise ImportError(
                    f"langid: lingua decides uncertain texts (second_opinion: {self.second_opinion}, as "
                    "resolved where the "
                    "pipeline was configured) but lingua-language-detector is not installed in this Python: install "
                    "'ccpretrain[data]' on every executor, or set second_opinion: none"
                )
            self._ask_lingua(lines, present, langs, scores)
        return langs, scores

    def _window(self, line: str) -> str:
        """The middle ``ask_max_chars`` characters: a page's start and end are mostly navigation."""
        return middle(line, self.ask_max_chars)

    def _ask_lingua(self, lines: list[str], present: list[int], langs: list[str | None], scores: list[float]) -> None:
        """Let lingua relabel the texts lid.176 is unsure of (in place)."""
        codes = lingua_codes()
        known = set(codes.values()) | {"no"}
        always = set(self.ask_labels)
        candidates = [
            i for i in present
            if langs[i] in known
            and (scores[i] < self.ask_below or len(lines[i]) < self.ask_chars or langs[i] in always)
        ]  # fmt: skip
        ask = [i for i in candidates if not self._trusted_english(lines[i], langs[i], scores[i])]
        if len(ask) < len(candidates):
            self.count("lingua_trusted_english", len(candidates) - len(ask))
        if not ask:
            return
        self.count("lingua_asked", len(ask))
        windows = [self._window(lines[i]) for i in ask]
        # One text at a time: lingua's thread pool costs ~15% more CPU, and each Spark core runs its own worker.
        detector = lingua_detector(self.lingua_accuracy)
        results = [detector.compute_language_confidence_values(window) for window in windows]
        to_english = [i for i, values in zip(ask, results) if values and codes[values[0].language] == "en" != langs[i]]
        support = (
            self._english_probability([middle(lines[i], self.max_chars) for i in to_english])
            if self.english_support
            else []
        )
        unsupported = {i for i, p in zip(to_english, support) if p < self.english_support}
        for i, window, values in zip(ask, windows, results):
            if not values:
                continue
            best = codes[values[0].language]
            if best == "en" != langs[i] and scores[i] >= 0.5 and latin_share(window) < ENGLISH_MIN_LATIN:
                self.count("lingua_mixed_script_kept")
                continue
            if i in unsupported:
                self.count("lingua_english_unsupported")
                continue
            if best != langs[i]:
                self.count("lingua_relabelled")
            scores[i] = max(scores[i], values[0].value) if best == langs[i] else values[0].value
            langs[i] = best

    def _trusted_english(self, line: str, lang: str | None, score: float) -> bool:
        """A page lid.176 confidently calls English: lingua is not asked (English is most of a crawl,
        and lingua costs as much as lid.176 there); lid.176's English errors are on short texts."""
        return (
            lang == "en"
            and score >= self.ask_below
            and self.trust_english_chars is not None
            and len(line) >= self.trust_english_chars
        )

    def _english_probability(self, lines: list[str]) -> list[float]:
        """lid.176's probability for English per line (0.0 when English is not among its top labels)."""
        if not lines:
            return []
        labels, probs = self._model().predict(lines, k=SUPPORT_LABELS)
        english = LABEL_PREFIX + "en"
        return [float(dict(zip(row, p)).get(english, 0.0)) for row, p in zip(labels, probs)]

    def process(self, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
        langs, scores = self.predict(batch.column("text").to_pylist())
        stored = pa.array(scores, pa.float32())  # decided on the value recorded, so stored signals decide alike
        batch = with_column(batch, "lang", langs, pa.string())
        return with_column(batch, "lang_score", stored), self.reasons(langs, stored.to_pylist())

    decision_fields = ("languages", "threshold", "thresholds")

    def reasons_from_signals(self, batch: pa.Table) -> list[str | None]:
        return self.reasons(batch.column("lang").to_pylist(), batch.column("lang_score").to_pylist())

    def reasons(self, langs: list[str | None], scores: list[float]) -> list[str | None]:
        """Why each document is dropped (None: kept), given its language and probability."""
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
        return reasons
