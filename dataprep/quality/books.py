"""Stage ``books_quality``: rules that fit whole books, in place of the web's.

Gopher's and C4's rules judge a web page: a book's verse, dialogue and chapter titles break their line
rules, and its length passes their word limits only by accident, so they cut or drop good books. What is
worth dropping in a book collection is a fragment (too few words), a book that is mostly not prose (tables
of figures, indexes) and one whose lines are mostly repeats (a scan's running heads, a broken file).
"""

from __future__ import annotations

from collections import Counter

from pydantic import Field

from dataprep.core.registry import register
from dataprep.quality.base import KindFilter


@register("books_quality")
class BooksQuality(KindFilter):
    """Drops fragments (``too_short``), books mostly not letters (``not_prose``) and books whose lines are mostly
    repeats (``repeated_lines``); never cuts a book."""

    min_words: int = Field(500, ge=0, description="fewer words is a fragment, not a book")
    min_alpha_share: float = Field(0.6, ge=0.0, le=1.0, description="share of non-space characters that are letters")
    max_repeated_line_share: float = Field(
        0.3, ge=0.0, le=1.0, description="share of non-empty lines that repeat an earlier one"
    )
    source_kinds: list[str] = Field(
        default_factory=lambda: ["books"], description="source kinds judged; others pass untouched"
    )

    def decide(self, text: str) -> str | None:
        if len(text.split()) < self.min_words:
            return "too_short"
        chars = sum(not c.isspace() for c in text)
        if chars and sum(c.isalpha() for c in text) / chars < self.min_alpha_share:
            return "not_prose"
        lines = Counter(line.strip() for line in text.splitlines() if line.strip())
        repeats = sum(n - 1 for n in lines.values())
        if repeats / max(sum(lines.values()), 1) > self.max_repeated_line_share:
            return "repeated_lines"
        return None
