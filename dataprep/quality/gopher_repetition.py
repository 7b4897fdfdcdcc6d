"""Gopher's repetition rules (Rae et al. 2021, appendix A), as FineWeb applies them.

Decisions and reason names match datatrove's GopherRepetitionFilter (the parity test checks every rule on
real pages). Each threshold is a parameter; ``null`` switches a rule off. The words counted are those of
the quality rules (``gopher.content_counts``); repeated n-grams are found with numpy (``NGrams``).
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pyarrow as pa
from pydantic import Field

from dataprep.core.registry import register
from dataprep.quality.base import QualityFilter
from dataprep.quality.gopher import content_counts
from dataprep.quality.languages import split_words, stop_words

_PARAGRAPHS = re.compile(r"\n{2,}")
# The paragraph and line rules, in the order they are tried; each is its setting's and its reason's name
_LINE_RULES = ("dup_para_frac", "dup_para_char_frac", "dup_line_frac", "dup_line_char_frac")
_LINES = re.compile(r"\n+")


def without_short_lines(text: str, min_words: int) -> str:
    """The text without lines of fewer than ``min_words`` words (menu items, "Share", "Reply", dates):
    navigation residue that repeats on real pages and says nothing about the text's own repetition."""
    if min_words <= 1:
        return text
    kept = "\n".join(line for line in text.split("\n") if not line.strip() or len(line.split()) >= min_words)
    return kept.strip("\n")  # a removed first or last line leaves no empty "line" to count as a duplicate


def top_word_share(words: tuple[str, ...], language: str) -> float:
    """Share of the words taken by the most frequent word that is not a stop word, symbol or short word
    (keyword stuffing: "cheap viagra", "plumber Springfield")."""
    skip = stop_words(language)
    counts = Counter(words)
    lowered: Counter = Counter()
    for w, n in counts.items():
        if len(w) >= 4 and any(map(str.isalpha, w)) and w.lower() not in skip:
            lowered[w.lower()] += n
    n_content = sum(content_counts(counts).values())
    return max(lowered.values()) / n_content if lowered and n_content else 0.0


def collapse_doubled_lines(text: str) -> str:
    """The text with the second occurrence of every line that occurs exactly twice removed: a page
    shows its lead twice as teaser and body, or a block once per layout; spam repeats more often."""
    counts = Counter(line.strip() for line in text.split("\n") if line.strip())
    seen: set[str] = set()
    kept = []
    for line in text.split("\n"):
        key = line.strip()
        if counts[key] == 2 and key in seen:
            continue
        seen.add(key)
        kept.append(line)
    return "\n".join(kept)


def find_duplicates(items: list[str]) -> tuple[int, int]:
    """(number of repeated items, characters in them), counting every occurrence after the first."""
    seen: set[str] = set()
    count = chars = 0
    for item in items:
        if item in seen:
            count += 1
            chars += len(item)
        else:
            seen.add(item)
    return count, chars


_MULT = np.uint64(0x100000001B3)  # odd, so invertible modulo 2**64
_MULT_INV = np.uint64(pow(0x100000001B3, -1, 2**64))


def _occurs_twice(keys: np.ndarray) -> np.ndarray:
    """Which of ``keys`` occur more than once: neighbours in one argsort (cheaper than ``np.unique``
    with inverse and counts, which sorts stably)."""
    order = np.argsort(keys)
    ordered = keys[order]
    same = ordered[1:] == ordered[:-1]
    repeated = np.zeros(len(keys), bool)
    repeated[order[1:][same]] = True
    repeated[order[:-1][same]] = True
    return repeated


class NGrams:
    """The n-gram statistics of one document's words, computed with numpy: word n-grams are keyed by
    a 64-bit hash of word ids (exact in practice), and character strings of n-grams by a rolling hash
    over the characters (used only to find candidates; equality is then checked on the strings)."""

    def __init__(self, words: tuple[str, ...]) -> None:
        self.words = words
        vocab: dict[str, int] = {}
        self.ids = np.fromiter((vocab.setdefault(w, len(vocab)) for w in words), np.uint64, len(words))
        self.lengths = np.fromiter(map(len, words), np.int64, len(words))
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)])
        self._prefix = None
        self._none_repeat_from: int | None = None  # the smallest n seen with no repeated n-gram

    def _keys(self, n: int) -> np.ndarray:
        m = len(self.words) - n + 1
        keys = np.zeros(m, np.uint64)
        for j in range(n):
            keys = keys * _MULT + self.ids[j : j + m] + np.uint64(1)
        return keys

    def top_chars(self, n: int) -> int:
        """Characters of the most frequent n-gram (joined with spaces) times its count; ties go to
        the n-gram seen first, as with ``Counter.most_common``."""
        _, first, counts = np.unique(self._keys(n), return_index=True, return_counts=True)
        best = counts.max()
        i = int(first[counts == best].min())
        return (int(self.lengths[i : i + n].sum()) + n - 1) * int(best)

    def duplicate_chars(self, n: int) -> int:
        """Characters in n-grams (joined without spaces) that repeat an earlier one; a repeat skips
        its n words so overlapping repeats are not counted twice. Only n-grams whose hash occurs
        twice or more can repeat, so the sequential walk visits just those positions."""
        m = len(self.words) - n + 1
        if m <= 1 or (self._none_repeat_from is not None and n >= self._none_repeat_from):
            return 0  # a repeated n-gram repeats its (n-1)-word prefix: past an n with none, none
        if self._prefix is None:
            joined = "".join(self.words)
            codes = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), np.uint32).astype(np.uint64)
            powers = np.cumprod(np.full(len(codes), _MULT, np.uint64)) if len(codes) else codes
            self._prefix = (joined, np.concatenate([[np.uint64(0)], np.cumsum(codes * powers)]).astype(np.uint64))
            self._inv = np.concatenate([[np.uint64(1)], np.cumprod(np.full(len(codes), _MULT_INV, np.uint64))])
        joined, prefix = self._prefix
        starts, ends = self.offsets[:m], self.offsets[n : n + m]
        hashes = (prefix[ends] - prefix[starts]) * self._inv[starts] + (ends - starts).astype(np.uint64) * _MULT_INV
        candidates = np.flatnonzero(_occurs_twice(hashes))
        seen: set[str] = set()
        repeated = next_free = 0
        for i in candidates.tolist():
            if i < next_free:
                continue
            gram = joined[self.offsets[i] : self.offsets[i + n]]
            if gram in seen:
                repeated += len(gram)
                next_free = i + n
            else:
                seen.add(gram)
        if not repeated:
            self._none_repeat_from = n  # smaller than any n it held: that one would have returned above
        return repeated


@register("gopher_repetition")
class GopherRepetition(QualityFilter):
    """Drops documents that repeat themselves: duplicated lines or paragraphs, one n-gram dominating,
    or many repeated n-grams (fractions are of the document's characters)."""

    dup_line_frac: float | None = 0.3
    dup_para_frac: float | None = 0.3
    dup_line_char_frac: float | None = 0.2
    dup_para_char_frac: float | None = 0.2
    top_n_grams: list[tuple[int, float]] = [(2, 0.2), (3, 0.18), (4, 0.16)]
    dup_n_grams: list[tuple[int, float]] = [(5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10)]
    # Not in datatrove (defaults keep its decisions)
    min_line_words: int = Field(
        0, ge=0, description="judge repetition without lines of fewer words (navigation residue); 0: all lines"
    )
    max_top_word_frac: float | None = Field(
        None,
        description="drop 'top_word' when one content word is more than this share of the words (keyword stuffing); "
        "documents of 50+ words",
    )
    min_ngram_words: int = Field(
        0,
        ge=0,
        description="judge n-gram repetition only on documents of at least this many words: "
        "in a short page one repeated title already passes the thresholds",
    )
    collapse_doubled_lines: bool = Field(
        False,
        description="judge repetition with a line that occurs exactly twice kept once (a lead repeated as a teaser, a "
        "title as heading, a block in desktop and mobile layout)",
    )

    def decide(self, text: str, language: str) -> tuple[str | None, str]:
        if not text.strip():  # datatrove keeps whitespace-only texts here; nothing is lost by dropping them
            return "empty", text
        if self.max_top_word_frac:
            words = split_words(text, language)
            if len(words) >= 50 and top_word_share(words, language) > self.max_top_word_frac:
                return "top_word", text
        judged = without_short_lines(text, self.min_line_words)
        if self.collapse_doubled_lines:
            judged = collapse_doubled_lines(judged)
        return (self._repetition(judged, language) if judged.strip() else None), text

    decision_fields = (
        "dup_line_frac",
        "dup_para_frac",
        "dup_line_char_frac",
        "dup_para_char_frac",
        "top_n_grams",
        "dup_n_grams",
        "max_top_word_frac",
        "min_ngram_words",
    )

    def signal_fields(self) -> list[pa.Field]:
        """Fixed values, then one fraction per n-gram size the config sets (a filter may change the
        fractions, not the sizes)."""
        fixed = [pa.field("blank", pa.bool_()), pa.field("words", pa.int64()), pa.field("top_word_share", pa.float64())]
        fixed += [pa.field(name, pa.float64()) for name in _LINE_RULES] + [pa.field("ngram_words", pa.int64())]
        grams = [f"top_{n}_gram_frac" for n, _ in self.top_n_grams]
        grams += [f"dup_{n}_gram_frac" for n, _ in self.dup_n_grams]
        return fixed + [pa.field(name, pa.float64()) for name in grams]

    def measure(self, text: str, language: str) -> dict:
        values: dict = {"blank": not text.strip()}
        if values["blank"]:
            return values
        words = split_words(text, language)
        values.update(words=len(words), top_word_share=top_word_share(words, language))
        judged = without_short_lines(text, self.min_line_words)
        if self.collapse_doubled_lines:
            judged = collapse_doubled_lines(judged)
        if not judged.strip():
            return values
        n_chars = len(judged)
        paragraphs = _PARAGRAPHS.split(judged.strip())
        dups, chars = find_duplicates(paragraphs)
        values.update(dup_para_frac=dups / len(paragraphs), dup_para_char_frac=chars / n_chars)
        lines = _LINES.split(judged)
        dups, chars = find_duplicates(lines)
        values.update(dup_line_frac=dups / len(lines), dup_line_char_frac=chars / n_chars)
        grams = NGrams(split_words(judged, language))
        values["ngram_words"] = len(grams.words)
        for n in sorted({n for n, _ in self.top_n_grams}):
            values[f"top_{n}_gram_frac"] = grams.top_chars(n) / n_chars if len(grams.words) >= n else None
        for n in sorted({n for n, _ in self.dup_n_grams}):
            values[f"dup_{n}_gram_frac"] = grams.duplicate_chars(n) / n_chars
        return values

    def verdict(self, values: dict, language: str) -> str | None:
        if values["blank"]:
            return "empty"
        if self.max_top_word_frac and values["words"] >= 50 and values["top_word_share"] > self.max_top_word_frac:
            return "top_word"
        if values["dup_para_frac"] is None:  # nothing left to judge
            return None
        for name in _LINE_RULES:
            limit = getattr(self, name)
            if limit and values[name] > limit:
                return name
        if (not self.top_n_grams and not self.dup_n_grams) or values["ngram_words"] < self.min_ngram_words:
            return None
        for n, frac in self.top_n_grams:
            value = values[f"top_{n}_gram_frac"]
            if value is not None and value > frac:
                return f"top_{n}_gram"
        for n, frac in self.dup_n_grams:
            if values[f"dup_{n}_gram_frac"] > frac:
                return f"duplicated_{n}_n_grams"
        return None

    def _repetition(self, text: str, language: str) -> str | None:
        n_chars = len(text)
        paragraphs = _PARAGRAPHS.split(text.strip())
        dups, chars = find_duplicates(paragraphs)
        if self.dup_para_frac and dups / len(paragraphs) > self.dup_para_frac:
            return "dup_para_frac"
        if self.dup_para_char_frac and chars / n_chars > self.dup_para_char_frac:
            return "dup_para_char_frac"
        lines = _LINES.split(text)
        dups, chars = find_duplicates(lines)
        if self.dup_line_frac and dups / len(lines) > self.dup_line_frac:
            return "dup_line_frac"
        if self.dup_line_char_frac and chars / n_chars > self.dup_line_char_frac:
            return "dup_line_char_frac"
        if not self.top_n_grams and not self.dup_n_grams:
            return None
        words = split_words(text, language)
        if len(words) < self.min_ngram_words:
            return None
        grams = NGrams(words)
        for n, frac in self.top_n_grams:
            if len(grams.words) >= n and grams.top_chars(n) / n_chars > frac:
                return f"top_{n}_gram"
        for n, frac in self.dup_n_grams:
            if grams.duplicate_chars(n) / n_chars > frac:
                return f"duplicated_{n}_n_grams"
        return None
