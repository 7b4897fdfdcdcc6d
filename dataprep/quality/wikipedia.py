"""Stage ``wikipedia_quality``: the rules that fit encyclopedia articles, in place of the web's.

Articles are edited prose, so the web's Gopher/C4 rules mostly cost good text (short list lines,
tables turned into lines); what is worth dropping is a stub (a few words) and a page that is only a
list (``List of ...`` pages, indexes), whose lines carry little prose.
"""

from __future__ import annotations

from pydantic import Field

from dataprep.core.registry import register
from dataprep.quality.base import KindFilter

LIST_MARKER = "- "  # how the Wikipedia reader writes a list item


@register("wikipedia_quality")
class WikipediaQuality(KindFilter):
    """Drops stubs (``stub``: fewer than ``min_words`` words) and list pages (``list_page``: list items make
    up more than ``max_list_line_share`` of the lines)."""

    min_words: int = Field(50, ge=0, description="fewer words (title included) is a stub")
    max_list_line_share: float = Field(0.8, ge=0.0, le=1.0, description="share of non-empty lines that are list items")
    source_kinds: list[str] = Field(
        default_factory=lambda: ["wikipedia"], description="source kinds judged; others pass untouched"
    )

    def decide(self, text: str) -> str | None:
        if len(text.split()) < self.min_words:
            return "stub"
        lines = [line for line in text.splitlines()[1:] if line.strip()]  # the title line is no list item
        items = sum(line.startswith(LIST_MARKER) for line in lines)
        if lines and items / len(lines) > self.max_list_line_share:
            return "list_page"
        return None
