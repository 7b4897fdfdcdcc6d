"""FineWeb's own quality rules (Penedo et al. 2024), as datatrove's FineWebQualityFilter applies them:
enough lines ending in punctuation, not mostly short lines, almost no duplicated lines, and not a
list (few newlines per word)."""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

import pyarrow as pa
import regex
from pydantic import Field

from dataprep.core.registry import register
from dataprep.quality.base import QualityFilter
from dataprep.quality.gopher_repetition import collapse_doubled_lines, find_duplicates
from dataprep.quality.languages import TERMINAL_CLASS, is_terminal_punct, split_words

# A sentence end inside a line: a stop, then closing brackets or quotes (German „…“ and »…« close with
# initial quotes), emoji or markdown emphasis, then a space or the line's end. "3.5" and "example.com" are none.
_CLOSING = r"[\p{Pe}\p{Pi}\p{Pf}\p{So}\p{Sk}\"'*_\u200d\ufe0f]*(?:\s|$)"


@lru_cache(maxsize=8)
def _sentence_end(stops: tuple[str, ...] | None) -> regex.Pattern:
    return regex.compile((TERMINAL_CLASS if stops is None else f"[{regex.escape(''.join(stops))}]") + _CLOSING)


@register("fineweb_quality")
class FineWebQuality(QualityFilter):
    """Drops documents with few punctuated lines, mostly short lines, duplicated lines or list layout."""

    line_punct_thr: float = 0.12
    line_punct_exclude_zero: bool = False
    stop_chars: list[str] | None = None  # default: every sentence-terminal character
    short_line_thr: float = 0.67
    short_line_length: int = 30
    char_duplicates_ratio: float = 0.01
    new_line_ratio: float = 0.3
    # Not in datatrove (the defaults keep its decisions)
    line_punct_share: Literal["lines", "chars"] = Field(
        "lines",
        description="'chars': the share of characters in lines that end a sentence, so headings, dates and table cells "
        "do not outweigh the paragraphs",
    )
    line_punct_test: Literal["ends", "holds"] = Field(
        "ends",
        description="'holds': a line counts when it holds a sentence end anywhere (a stop before a space, closing "
        "quotes, brackets or emoji), so a paragraph that trails off into credits or a tag still counts",
    )
    short_line_share: Literal["lines", "chars"] = Field(
        "lines",
        description="'chars': the share of characters in short lines, so a recipe's ingredient list does not outweigh "
        "its method",
    )
    dup_min_line_words: int = Field(
        0, ge=0, description="duplicated lines of fewer words (menu items, 'Share', 'Reply') do not count; 0: all lines"
    )
    dup_collapse_doubled: bool = Field(
        False, description="a line that occurs exactly twice is not duplicated text (a lead repeated as a teaser)"
    )
    decision_fields = (
        "line_punct_thr",
        "line_punct_exclude_zero",
        "short_line_thr",
        "char_duplicates_ratio",
        "new_line_ratio",
    )
    rule_fields = (
        pa.field("lines", pa.int64()),
        pa.field("line_punct_ratio", pa.float64()),
        pa.field("short_line_ratio", pa.float64()),
        pa.field("char_dup_ratio", pa.float64()),
        pa.field("list_ratio", pa.float64()),
    )

    def _ends_sentence(self, line: str) -> bool:
        if self.line_punct_test == "holds":
            return _sentence_end(None if self.stop_chars is None else tuple(self.stop_chars)).search(line) is not None
        if self.stop_chars is not None:
            return line.endswith(tuple(self.stop_chars))
        return is_terminal_punct(line[-1:])

    @staticmethod
    def _share(some: list[str], lines: list[str], by: str) -> float:
        """``some`` lines' share of ``lines``, counted in lines or in characters."""
        if by == "chars":
            return sum(map(len, some)) / sum(map(len, lines))
        return len(some) / len(lines)

    def decide(self, text: str, language: str) -> tuple[str | None, str]:
        lines = [line for line in text.split("\n") if line.strip()]
        if not lines:
            return "empty", text
        ratio = self._punct_share(lines)
        if ratio < self.line_punct_thr and not (ratio == 0 and self.line_punct_exclude_zero):
            return "line_punct_ratio", text
        if self._short_share(lines) > self.short_line_thr:
            return "short_line_ratio", text
        if self._dup_share(text, lines) > self.char_duplicates_ratio:
            return "char_dup_ratio", text
        if self._list_share(text, language) > self.new_line_ratio:
            return "list_ratio", text
        return None, text

    def measure(self, text: str, language: str) -> dict:
        lines = [line for line in text.split("\n") if line.strip()]
        if not lines:
            return {"lines": 0}
        return {
            "lines": len(lines),
            "line_punct_ratio": self._punct_share(lines),
            "short_line_ratio": self._short_share(lines),
            "char_dup_ratio": self._dup_share(text, lines),
            "list_ratio": self._list_share(text, language),
        }

    def verdict(self, values: dict, language: str) -> str | None:
        if not values["lines"]:
            return "empty"
        ratio = values["line_punct_ratio"]
        if ratio < self.line_punct_thr and not (ratio == 0 and self.line_punct_exclude_zero):
            return "line_punct_ratio"
        if values["short_line_ratio"] > self.short_line_thr:
            return "short_line_ratio"
        if values["char_dup_ratio"] > self.char_duplicates_ratio:
            return "char_dup_ratio"
        if values["list_ratio"] > self.new_line_ratio:
            return "list_ratio"
        return None

    def _punct_share(self, lines: list[str]) -> float:
        return self._share([line for line in lines if self._ends_sentence(line)], lines, self.line_punct_share)

    def _short_share(self, lines: list[str]) -> float:
        short = [line for line in lines if len(line) <= self.short_line_length]
        return self._share(short, lines, self.short_line_share)

    def _dup_share(self, text: str, lines: list[str]) -> float:
        judged = lines
        if self.dup_min_line_words:
            judged = [line for line in lines if len(line.split()) >= self.dup_min_line_words]
        if self.dup_collapse_doubled:
            judged = collapse_doubled_lines("\n".join(judged)).split("\n")
        return find_duplicates(judged)[1] / max(len(text) - text.count("\n"), 1)

    @staticmethod
    def _list_share(text: str, language: str) -> float:
        return text.count("\n") / max(len(split_words(text, language)), 1)
