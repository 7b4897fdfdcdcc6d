"""Gopher's quality rules (Rae et al. 2021, appendix A), as FineWeb applies them.

Decisions and reason names match datatrove's GopherQualityFilter (the parity test checks every rule on
real pages). Each threshold is a parameter; ``null`` switches a rule off. Words and per-language
thresholds (e.g. no mean-word-length rule for Chinese and Japanese) come from ``languages.LANGUAGES``.
The repetition rules are in ``gopher_repetition``.
"""

from __future__ import annotations

from collections import Counter
from typing import Literal

import pyarrow as pa
from pydantic import Field

from dataprep.core.registry import register
from dataprep.quality.base import QualityFilter
from dataprep.quality.languages import CHAR_SPLIT_LANGUAGES, LANGUAGES, is_symbol_word, split_words, stop_words

_BULLETS = ("•", "-")
_ELLIPSES = ("...", "…")


@register("gopher_quality")
class GopherQuality(QualityFilter):
    """Drops documents that do not look like prose: too short/long, odd word lengths, symbol-heavy,
    list-like, or without common function words."""

    min_doc_words: int | None = 50
    max_doc_words: int | None = 100_000
    min_avg_word_length: float | None = 3
    max_avg_word_length: float | None = 10
    max_symbol_word_ratio: float | None = 0.1  # '#' and ellipses, each, per word
    max_bullet_lines_ratio: float | None = 0.9
    max_ellipsis_lines_ratio: float | None = 0.3
    min_alpha_words_ratio: float | None = Field(0.8, description="datatrove calls it max_non_alpha_words_ratio")
    min_stop_words: int | None = 2
    stop_words: list[str] | None = Field(
        None, description="default: the Gopher list for English, per-language lists otherwise"
    )
    # Not in datatrove (defaults keep its decisions): datatrove's words split punctuation off, so every
    # comma and bracket counts against the alpha ratio, and so do figures, dates, prices and scores.
    alpha_words: Literal["tokens", "whitespace"] = Field(
        "tokens",
        description="words of the alpha ratio: 'whitespace' splits on spaces as the Gopher paper does "
        "(punctuation stays on its word)",
    )
    alpha_counts_numbers: bool = Field(
        False, description="words with a digit (numbers, dates, prices) count as alphabetic"
    )
    stop_words_unlisted: Literal["english", "skip"] = Field(
        "english",
        description="a language without a stop-word list of its own (languages.LANGUAGES): 'english' judges it by "
        "English's, as datatrove does, so nearly all its pages fail; 'skip' does not apply the rule",
    )
    decision_fields = (
        "min_doc_words",
        "max_doc_words",
        "min_avg_word_length",
        "max_avg_word_length",
        "max_symbol_word_ratio",
        "max_bullet_lines_ratio",
        "max_ellipsis_lines_ratio",
        "min_alpha_words_ratio",
        "min_stop_words",
    )
    rule_fields = (
        pa.field("doc_words", pa.int64()),
        pa.field("mean_word_length", pa.float64()),
        pa.field("hash_ratio", pa.float64()),
        pa.field("ellipsis_ratio", pa.float64()),
        pa.field("bullet_lines_ratio", pa.float64()),
        pa.field("ellipsis_lines_ratio", pa.float64()),
        pa.field("alpha_words_ratio", pa.float64()),
        pa.field("stop_word_count", pa.int64()),
    )

    def decide(self, text: str, language: str) -> tuple[str | None, str]:
        words = split_words(text, language)
        n_words = len(words) or 1  # an empty text fails the word-count rule; ratios stay defined
        counts = Counter(words)  # the word rules look at each distinct word once
        content = content_counts(counts)
        n_content = sum(content.values())
        if self.min_doc_words and n_content < self.min_doc_words:
            return "gopher_short_doc", text
        if self.max_doc_words and n_content > self.max_doc_words:
            return "gopher_long_doc", text
        if content:
            mean_length = _mean_length(content, n_content)
            min_length, max_length = (
                self.param("min_avg_word_length", language),
                self.param("max_avg_word_length", language),
            )
            if min_length and mean_length < min_length:
                return "gopher_below_avg_threshold", text
            if max_length and mean_length > max_length:
                return "gopher_above_avg_threshold", text
        if self.max_symbol_word_ratio:
            if text.count("#") / n_words > self.max_symbol_word_ratio:
                return "gopher_too_many_hashes", text
            if (text.count("...") + text.count("…")) / n_words > self.max_symbol_word_ratio:
                return "gopher_too_many_ellipsis", text
        if self.max_bullet_lines_ratio or self.max_ellipsis_lines_ratio:
            lines = text.splitlines() or [""]
            if self.max_bullet_lines_ratio and _bullet_share(lines) > self.max_bullet_lines_ratio:
                return "gopher_too_many_bullets", text
            if self.max_ellipsis_lines_ratio and _end_ellipsis_share(lines) > self.max_ellipsis_lines_ratio:
                return "gopher_too_many_end_ellipsis", text
        if self.min_alpha_words_ratio and self._alpha_ratio(text, counts, language) < self.min_alpha_words_ratio:
            return "gopher_below_alpha_threshold", text
        if self.min_stop_words:
            found = self._stop_word_count(counts, language)
            if found is not None and found < self.min_stop_words:
                return "gopher_enough_stop_words", text  # datatrove's name; it means "too few"
        return None, text

    def measure(self, text: str, language: str) -> dict:
        words = split_words(text, language)
        n_words = len(words) or 1
        counts = Counter(words)
        content = content_counts(counts)
        n_content = sum(content.values())
        lines = text.splitlines() or [""]
        return {
            "doc_words": n_content,
            "mean_word_length": _mean_length(content, n_content) if content else None,
            "hash_ratio": text.count("#") / n_words,
            "ellipsis_ratio": (text.count("...") + text.count("…")) / n_words,
            "bullet_lines_ratio": _bullet_share(lines),
            "ellipsis_lines_ratio": _end_ellipsis_share(lines),
            "alpha_words_ratio": self._alpha_ratio(text, counts, language),
            "stop_word_count": self._stop_word_count(counts, language),
        }

    def verdict(self, values: dict, language: str) -> str | None:
        n_content, mean_length = values["doc_words"], values["mean_word_length"]
        if self.min_doc_words and n_content < self.min_doc_words:
            return "gopher_short_doc"
        if self.max_doc_words and n_content > self.max_doc_words:
            return "gopher_long_doc"
        if mean_length is not None:
            min_length = self.param("min_avg_word_length", language)
            max_length = self.param("max_avg_word_length", language)
            if min_length and mean_length < min_length:
                return "gopher_below_avg_threshold"
            if max_length and mean_length > max_length:
                return "gopher_above_avg_threshold"
        rules = (
            (self.max_symbol_word_ratio, values["hash_ratio"], "gopher_too_many_hashes"),
            (self.max_symbol_word_ratio, values["ellipsis_ratio"], "gopher_too_many_ellipsis"),
            (self.max_bullet_lines_ratio, values["bullet_lines_ratio"], "gopher_too_many_bullets"),
            (self.max_ellipsis_lines_ratio, values["ellipsis_lines_ratio"], "gopher_too_many_end_ellipsis"),
        )
        for limit, value, reason in rules:
            if limit and value > limit:
                return reason
        if self.min_alpha_words_ratio and values["alpha_words_ratio"] < self.min_alpha_words_ratio:
            return "gopher_below_alpha_threshold"
        found = values["stop_word_count"]
        if self.min_stop_words and found is not None and found < self.min_stop_words:
            return "gopher_enough_stop_words"
        return None

    def _stop_word_count(self, counts: Counter, language: str) -> int | None:
        """How many of the language's stop words the text holds (None: the rule does not apply to it)."""
        if self.stop_words is None and self.stop_words_unlisted != "english" and language not in LANGUAGES:
            return None
        wanted = frozenset(self.stop_words) if self.stop_words is not None else stop_words(language)
        return len(wanted.intersection(counts))

    def _alpha_ratio(self, text: str, counts: Counter, language: str) -> float:
        if self.alpha_words == "whitespace" and language not in CHAR_SPLIT_LANGUAGES:
            counts = Counter(text.split())
        wanted = str.isalnum if self.alpha_counts_numbers else str.isalpha
        return sum(n for w, n in counts.items() if any(map(wanted, w))) / (counts.total() or 1)


def _mean_length(content: dict[str, int], n_content: int) -> float:
    return sum(len(w) * n for w, n in content.items()) / n_content


def _bullet_share(lines: list[str]) -> float:
    return sum(line.lstrip().startswith(_BULLETS) for line in lines) / len(lines)


def _end_ellipsis_share(lines: list[str]) -> float:
    return sum(line.rstrip().endswith(_ELLIPSES) for line in lines) / len(lines)


def content_counts(counts: Counter) -> dict[str, int]:
    """The words (with their counts) that are not symbols: the words Gopher's rules count."""
    return {w: n for w, n in counts.items() if not is_symbol_word(w)}
