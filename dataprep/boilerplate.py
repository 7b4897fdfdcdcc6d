"""Boilerplate removal on the blocks of Resiliparse's main-content extract.

Resiliparse's ``main_content`` drops navigation, headers and footers cheaply but keeps related-article
lists, bylines, captions and newsletter boxes. Its ``minimal_html`` output keeps the block structure
(``<p>``, ``<h1-6>``, ``<li>``, ``<pre>``, loose text) and the links, which is enough for a few generic,
language-independent rules (no word lists) that run in well under a millisecond per page.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

_TAG = re.compile(r"<[^>]*>")
_LINK = re.compile(r"<a\b[^>]*>(.*?)</a>", re.S)
_BLOCK_START = re.compile(r"\s*<(p|h[1-6]|li|pre|/?ul|/?ol)\b")
# Sentence-final marks in Latin, CJK, Arabic, Devanagari and Ethiopic scripts, plus closing quotes.
SENTENCE_END = tuple(".!?:;…。！？．؟।።\"'”’»)")


@dataclass
class Block:
    tag: str  # p, h, li, pre, or text (anything else: divs, spans, table cells, captions)
    text: str
    chars: int  # whitespace-normalised length
    link_chars: int

    @property
    def link_density(self) -> float:
        return self.link_chars / self.chars

    @property
    def is_paragraph(self) -> bool:
        """A long, sentence-like paragraph with few links: the evidence of main text."""
        return self.chars >= 100 and self.link_density < 0.2 and self.text.endswith(SENTENCE_END)


def _plain(fragment: str) -> str:
    return html.unescape(_TAG.sub("", fragment.replace("<br>\n", "\n").replace("<br>", "\n")))


def _width(text: str) -> int:
    return len(" ".join(text.split()))


def parse_blocks(minimal_html: str) -> list[Block]:
    """Blocks of ``extract_plain_text(..., preserve_formatting='minimal_html', links=True)`` in order.
    Paragraphs and ``<pre>`` may span lines; every other block is one line."""
    raw: list[tuple[str, str]] = []
    open_lines: list[str] | None = None
    close = ""
    for line in minimal_html.split("\n"):
        if open_lines is not None:
            open_lines.append(line)
            if close in line:
                raw.append((close[2:-1], "\n".join(open_lines)))
                open_lines = None
            continue
        if not line.strip():
            continue
        match = _BLOCK_START.match(line)
        tag = match.group(1) if match else "text"
        if tag.lstrip("/") in ("ul", "ol"):
            continue
        if tag in ("p", "pre") and f"</{tag}>" not in line:
            open_lines, close = [line], f"</{tag}>"
            continue
        raw.append(("h" if tag[0] == "h" else tag, line))
    if open_lines is not None:  # unclosed at the end of the output
        raw.append((close[2:-1], "\n".join(open_lines)))
    blocks = []
    for tag, fragment in raw:
        text = _plain(fragment).strip()
        chars = _width(text)
        if chars:
            links = sum(_width(_plain(a)) for a in _LINK.findall(fragment))
            blocks.append(Block(tag, text, chars, min(links, chars)))
    return blocks


def main_blocks(blocks: list[Block], max_link_density: float = 0.3, tail_blocks: int = 1) -> list[bool]:
    """Which blocks are main text. Rules, each generic (measured in bench/bench_extract.py):
    1. blocks with over 30% of their text in links are menus, tag clouds and related-article lists;
    2. on pages written in ``<p>`` (at least half the text), short loose text outside paragraphs,
       headings and lists is bylines, dates, captions and widget labels;
    3. after the last long paragraph only ``tail_blocks`` more blocks stay: what follows the article
       is related posts, author boxes, newsletter and comment prompts;
    4. a heading followed by dropped or link-dense blocks titles boilerplate ("Related posts").
    """
    n = len(blocks)
    keep = [b.link_density <= max_link_density for b in blocks]
    total = sum(b.chars for b in blocks) or 1
    if sum(b.chars for b in blocks if b.tag == "p") >= 0.5 * total:
        for i, b in enumerate(blocks):
            if b.tag == "text" and b.chars < 150:
                keep[i] = False
    last = max((i for i, b in enumerate(blocks) if b.is_paragraph), default=None)
    if last is not None:
        for i in range(last + tail_blocks + 1, n):
            keep[i] = False
    after = list(keep)
    for i, b in enumerate(blocks):
        if b.tag != "h" or not after[i]:
            continue
        j = i + 1  # the next block, skipping the loose text of rule 2 (a byline under a title)
        while j < n and not after[j] and blocks[j].tag == "text" and blocks[j].link_density <= max_link_density:
            j += 1
        nxt = blocks[j] if j < n else None
        if nxt is None or nxt.link_density > max_link_density or (not after[j] and nxt.tag != "h"):
            keep[i] = False
    return keep


def render(blocks: list[Block], keep: list[bool]) -> str:
    """Kept blocks as plain text, paragraphs separated by blank lines (line filters downstream need them)."""
    return "\n\n".join(("• " + b.text if b.tag == "li" else b.text) for b, k in zip(blocks, keep) if k)


def kept_share(blocks: list[Block], keep: list[bool]) -> float:
    """Share of main-content characters the rules kept: low means the page did not look like an
    article to them (listings, recipes, tables), so their verdict is uncertain."""
    total = sum(b.chars for b in blocks)
    return sum(b.chars for b, k in zip(blocks, keep) if k) / total if total else 0.0
