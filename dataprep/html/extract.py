"""Stage ``extract``: raw HTML bytes -> main text.

Engines (quality and speed on trafilatura's annotated pages: ``bench/extraction/bench_extract.py``, figures in
the README):
- ``auto`` (default): ``blocks``, and the few pages whose blocks look least like an article go to
  Trafilatura (counted in stats.json as ``routed_to_trafilatura``).
- ``blocks``: Resiliparse main content plus our boilerplate removal (``dataprep/html/boilerplate.py``).
- ``resiliparse``: Resiliparse main content only: fastest, most text, most boilerplate.
- ``trafilatura``: Trafilatura alone, as datatrove/FineWeb run it: slowest.

Bytes become text through ``charset.decode_html``. Documents that already have text (WET, JSONL,
Parquet) pass through unchanged. Text that is largely U+FFFD (bytes no charset decoded) is counted,
and dropped with ``max_replacement_share``. Trafilatura runs under a per-page time limit
(``time_limit``: a timer signal in the worker's own process, no process per page); a page over it is
dropped as ``extract:timeout``.
"""

from __future__ import annotations

import re
from typing import Literal

import pyarrow as pa
from pydantic import Field
from resiliparse.parse.html import HTMLTree

from dataprep.core.registry import register
from dataprep.core.stage import DocumentStage, with_column
from dataprep.html.boilerplate import drop_marked_elements, kept_share, main_blocks, marked_names, parse_blocks, render
from dataprep.html.charset import decode_html
from dataprep.html.time_limit import ExtractionTimeout, time_limit

PAYLOAD_COLUMNS = ("html", "charset")
# Resiliparse's main-content heuristics (and our marked-element removal) take time quadratic in nesting
# depth; deeper pages are extracted without them. Real pages stay far below the limit.
MAX_DEPTH = 256
# Some element nests MAX_DEPTH deep iff the last element child of its parent does (as deep): matching
# last children only gives the same answer while climbing from far fewer elements.
_TOO_DEEP = " > ".join(["*"] * MAX_DEPTH) + ":last-child"
REPLACEMENT = "\ufffd"
REPLACEMENT_NOTICE = 0.01  # documents whose text is more U+FFFD than this are counted as replacement_chars

# A ruby reading (<rt>, or the <rp> parentheses around it) up to its end tag, which HTML lets pages
# leave out: 漢字<rt>かんじ</rt> would come out as 漢字かんじ.
_RUBY_READING = re.compile(r"<(rt|rp)\b[^>]*>[^<]*(?:</\1\s*>)?", re.IGNORECASE)
# Whether a page may hold one: a literal first character and no IGNORECASE let the scan skip ahead
# (twice as fast as ``"<r" in page`` on a page with non-Latin-1 text, which also missed ``<RT>``).
_RUBY_START = re.compile(r"<[rR][tTpP]")


def _too_deep(tree: HTMLTree) -> bool:
    """Whether the page's body nests deeper than MAX_DEPTH."""
    body = tree.body  # each access wraps the node anew
    return body is not None and body.query_selector(_TOO_DEEP) is not None


def _parse(html: str) -> tuple[HTMLTree, bool]:
    """Resiliparse's DOM, and whether it nests deeper than MAX_DEPTH."""
    tree = HTMLTree.parse(html)
    return tree, _too_deep(tree)


@register("extract")
class Extract(DocumentStage):
    """HTML -> main text. Drops ``extract:empty`` when nothing remains (redirect stubs, image pages)."""

    engine: Literal["auto", "blocks", "resiliparse", "trafilatura"] = "auto"
    # blocks/auto: first remove elements whose class/id marks them as boilerplate (newsletter, related, ...)
    drop_marked: bool = True
    # auto: pages where the block rules keep less than this share of the main content go to Trafilatura
    # (listings, recipes, tables), unless larger than route_max_chars (Trafilatura is slow there).
    route_below: float = Field(0.3, ge=0.0, le=1.0)
    route_max_chars: int = Field(1_000_000, ge=0)
    # Resiliparse options (resiliparse.extract.html2text.extract_plain_text); blocks/auto use
    # main_content, alt_texts and comments (they need the block structure and links).
    main_content: bool = True  # heuristics that drop navigation, headers, footers, sidebars
    preserve_formatting: bool = True  # keep paragraph breaks: later line-based filters need them
    list_bullets: bool = True
    alt_texts: bool = False  # image alt texts are mostly captions and file names
    links: bool = False
    comments: bool = False  # comment sections are not main content (measured: less boilerplate)
    # Trafilatura options (trafilatura.extract)
    favour_precision: bool = True  # as FineWeb/datatrove: less boilerplate, a little less text
    include_comments: bool = False
    include_tables: bool = True
    trafilatura_fast: bool = False  # Trafilatura's fast=True: skip its fallback extractors (readability, jusText)
    trafilatura_timeout: float | None = Field(
        20.0, gt=0, description="CPU seconds per page in Trafilatura; a page over it is dropped as extract:timeout"
    )
    max_replacement_share: float | None = Field(
        None, ge=0, le=1, description="drop text more U+FFFD than this share (undecodable bytes); null: only count"
    )
    ruby_readings: bool = False  # keep <rt>/<rp> ruby readings (furigana); inlined they repeat words

    removed_columns = PAYLOAD_COLUMNS
    reads_text = False  # it makes the text

    def process(self, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
        n = batch.num_rows
        texts = batch.column("text").to_pylist()
        htmls = batch.column("html").to_pylist() if "html" in batch.column_names else [None] * n
        charsets = batch.column("charset").to_pylist() if "charset" in batch.column_names else [None] * n
        reasons: list[str | None] = [None] * n
        for i, (html, charset) in enumerate(zip(htmls, charsets)):
            if html is not None:  # rows without html (WET, JSONL) keep their text
                try:
                    texts[i] = self.extract(decode_html(html, charset))
                except ExtractionTimeout:
                    texts[i], reasons[i] = None, "extract:timeout"
                    self.count("trafilatura_timeout")
        for i, text in enumerate(texts):
            if reasons[i] is None:
                reasons[i] = self._replacement_reason(text) if text and text.strip() else "extract:empty"
        out = batch.drop_columns([c for c in PAYLOAD_COLUMNS if c in batch.column_names])
        return with_column(out, "text", texts, pa.string()), reasons

    def _replacement_reason(self, text: str) -> str | None:
        share = text.count(REPLACEMENT) / len(text)
        if share > REPLACEMENT_NOTICE:
            self.count("replacement_chars")
        if self.max_replacement_share is not None and share > self.max_replacement_share:
            return "extract:replacement_chars"
        return None

    def extract(self, html: str) -> str:
        if not self.ruby_readings and _RUBY_START.search(html):
            html = _RUBY_READING.sub("", html)
        if self.engine == "trafilatura":
            return self._trafilatura(html)
        if self.engine == "resiliparse":
            return self._resiliparse(*_parse(html), self.preserve_formatting, self.links)
        blocks, keep, dropped = self._main_blocks(html, self.drop_marked)
        if dropped and not any(keep):  # a loose class name took the article with it
            self.count("extracted_again_without_marked")
            blocks, keep, _ = self._main_blocks(html, False)
        text = render(blocks, keep)
        if self.engine == "auto" and kept_share(blocks, keep) < self.route_below and len(html) <= self.route_max_chars:
            self.count("routed_to_trafilatura")
            text = self._trafilatura(html) or text
        return text

    def _main_blocks(self, html: str, drop_marked: bool) -> tuple[list, list[bool], int]:
        """Blocks, which of them are main text, and how many marked elements were removed first."""
        tree, too_deep = _parse(html)
        dropped = drop_marked_elements(tree, marked_names(html)) if drop_marked and not too_deep else 0
        blocks = parse_blocks(self._resiliparse(tree, too_deep, "minimal_html", True))
        return blocks, main_blocks(blocks), dropped

    def _resiliparse(self, tree: HTMLTree, too_deep: bool, preserve_formatting: bool | str, links: bool) -> str:
        from resiliparse.extract.html2text import extract_plain_text

        return extract_plain_text(
            tree,
            main_content=self.main_content and not too_deep,
            preserve_formatting=preserve_formatting,
            list_bullets=self.list_bullets,
            alt_texts=self.alt_texts,
            links=links,
            comments=self.comments,
        ).strip()

    def _trafilatura(self, html: str) -> str:
        import trafilatura

        with time_limit(self.trafilatura_timeout):
            text = trafilatura.extract(
                html,
                favor_precision=self.favour_precision,
                include_comments=self.include_comments,
                include_tables=self.include_tables,
                fast=self.trafilatura_fast,
            )
        return (text or "").strip()
