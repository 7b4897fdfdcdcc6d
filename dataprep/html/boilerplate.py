"""Boilerplate removal on the blocks of Resiliparse's main-content extract.

Resiliparse's ``main_content`` drops navigation, headers and footers cheaply but keeps related-article
lists, bylines, captions and newsletter boxes. Two cheap passes remove most of the rest:
1. ``drop_marked_elements``, on the DOM before extraction: elements whose class or id names them as
   boilerplate (``newsletter``, ``related``, ``author``, ``share``, ...), as most site templates do;
2. ``main_blocks``, on the blocks of the ``minimal_html`` output (``<p>``, ``<h1-6>``, ``<li>``, ``<pre>``,
   loose text, with their links): generic, language-independent rules on link density and position.
"""

from __future__ import annotations

import functools
import html
import re
from dataclasses import dataclass

from resiliparse.parse.html import HTMLTree

_TAG = re.compile(r"<[^>]*>")
_LINK = re.compile(r"<a\b[^>]*>(.*?)</a>", re.S)
_BLOCK_START = re.compile(r"\s*<(p|h[1-6]|li|pre|/?ul|/?ol)\b")
# Sentence-final marks in Latin, CJK, Arabic, Devanagari and Ethiopic scripts, plus closing quotes.
SENTENCE_END = tuple(".!?:;…。！？．؟।።\"'”’»)")

# Substrings of class/id names that site templates give to boilerplate containers (matched case-blind).
# Chosen on bench/extraction/bench_extract.py. Left out because they also name main-text containers on real pages:
# teaser, cta, header, hidden, meta, print, tip, nav (Resiliparse drops <nav> anyway). Left out because
# they changed nothing there while each name costs time on every page: copyright, disclaimer, donate,
# login, pagination, popular, recommend, sponsor, trending.
BOILERPLATE_NAMES = (
    "advert",
    "author",
    "banner",
    "bio",
    "breadcrumb",
    "byline",
    "caption",
    "comment",
    "cookie",
    "credit",
    "footer",
    "legend",
    "modal",
    "newsletter",
    "popup",
    "promo",
    "related",
    "share",
    "sharing",
    "sidebar",
    "signup",
    "social",
    "subscri",
    "tooltip",
    "widget",
)
_NEVER_DROPPED = ("body", "main", "article")


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


# The value of every class or id attribute in the raw HTML (quoted or not), as the HTML tokenizer reads it:
# an attribute name starts after whitespace, "/" or a quote and may have whitespace before its "=" (any
# name spelled with two spaces before "=" counts too). The match consumes only the "=" (a cheap literal to
# scan for; the first lookbehind rejects most) and reads the rest by lookaround, so a false match (in a
# script, say) whose quoted "value" runs over real markup cannot hide the attributes inside it. Extra
# values only add names, which cannot change what the selector finds.
_CLASS_OR_ID_VALUE = re.compile(
    r"""=(?<=[sd\s]=)(?:(?<=[\s/"']class=)|(?<=[\s/"']id=)|(?<=[\s/"']class\s=)|(?<=[\s/"']id\s=)|(?<=\s\s=))"""
    r"""(?=\s*("[^"]*"|'[^']*'|[^\t\n\f\r >]*))""",
    re.IGNORECASE,
)
# Character references that can decode to ASCII letters: numeric ones, and &fjlig; ("fj").
_LETTER_REFERENCE = re.compile(r"&(?:#|fjlig)")


def marked_names(page: str) -> tuple[str, ...]:
    """The BOILERPLATE_NAMES in some class or id value of the raw ``page``: a superset of those in the
    DOM's values (lexbor compares ASCII case-blind; character references are read decoded and not), so
    the selector over them finds exactly what the one over every name would, at a fraction of the
    cost: lexbor tests every element against every name."""
    values = "\0".join(set(_CLASS_OR_ID_VALUE.findall(page)))
    if _LETTER_REFERENCE.search(values):
        values += "\0" + html.unescape(values)
    values = values.lower()
    return tuple(name for name in BOILERPLATE_NAMES if name in values)


@functools.lru_cache(maxsize=1024)
def marked_selector(names: tuple[str, ...]) -> str:
    """The CSS selector for elements whose class or id contains one of ``names`` (case-blind). Each
    attribute's tests sit behind a test for the attribute, which most elements fail at once."""
    return ",".join(
        f"[{attribute}]:is({','.join(f'[{attribute}*={name} i]' for name in names)})" for attribute in ("class", "id")
    )


def drop_marked_elements(
    tree: HTMLTree,
    names: tuple[str, ...] = BOILERPLATE_NAMES,
    max_text_share: float = 0.3,
    max_paragraph_share: float = 0.5,
) -> int:
    """Remove elements whose class or id marks them as boilerplate, unless they look like the page's
    wrapper: names are loose ("elementor-widget-wrap", "entry-content no-share", Blogger's "widget Blog"
    hold articles), so an element holding over ``max_text_share`` of the page's text or
    ``max_paragraph_share`` of its ``<p>`` stays. ``names``: those to look for (``marked_names`` of the
    page: the ones it can hold). Returns how many elements were removed."""
    body = tree.body
    if body is None:
        return 0
    for element in body.query_selector_all("script,style,noscript,template")[
        :
    ]:  # not text: keep them out of the shares
        element.decompose()
    if not names:
        return 0
    # Slicing the node list first: indexing it one by one walks the list from the start each time.
    marked = body.query_selector_all(marked_selector(names))[:]
    if not marked:
        return 0
    total_text, total_paragraphs = len(body.text), None
    dropped = []
    for element in marked:
        # Document order: an element inside a dropped one comes right after it, before any other drop.
        if element.tag in _NEVER_DROPPED or (dropped and dropped[-1].contains(element)):
            continue
        if len(element.text) > max_text_share * total_text:
            continue
        paragraphs = len(element.query_selector_all("p"))
        if paragraphs:  # the page's count only when it can matter
            total_paragraphs = total_paragraphs or len(body.query_selector_all("p"))
            if paragraphs > max_paragraph_share * total_paragraphs:
                continue
        dropped.append(element)
    for element in dropped:
        element.decompose()
    return len(dropped)


def _plain(fragment: str) -> str:
    if "<" in fragment:
        if "<br>" in fragment:
            fragment = fragment.replace("<br>\n", "\n").replace("<br>", "\n")
        fragment = _TAG.sub("", fragment)
    return html.unescape(fragment)


def _width(text: str) -> int:
    return len(" ".join(text.split()))


_LIST_TAGS = frozenset(("ul", "/ul", "ol", "/ol"))


def parse_blocks(minimal_html: str) -> list[Block]:
    """Blocks of ``extract_plain_text(..., preserve_formatting='minimal_html', links=True)`` in order.
    Paragraphs and ``<pre>`` may span lines; every other block is one line."""
    raw: list[tuple[str, str]] = []
    lines = minimal_html.split("\n")
    i, n = 0, len(lines)
    while i < n:
        line = lines[i]
        i += 1
        match = _BLOCK_START.match(line)
        if match is None:
            if line and not line.isspace():
                raw.append(("text", line))
            continue
        tag = match.group(1)
        if tag in _LIST_TAGS:
            continue
        if tag == "p" or tag == "pre":
            close = "</p>" if tag == "p" else "</pre>"
            if close not in line:  # the block runs to the line holding its end tag, or to the end
                start = i - 1
                while i < n and close not in lines[i]:
                    i += 1
                i = min(i + 1, n)
                raw.append((tag, "\n".join(lines[start:i])))
                continue
        raw.append(("h" if tag[0] == "h" else tag, line))
    blocks = []
    for tag, fragment in raw:
        text = _plain(fragment).strip()
        chars = _width(text)
        if chars:
            links = sum(_width(_plain(a)) for a in _LINK.findall(fragment)) if "<a" in fragment else 0
            blocks.append(Block(tag, text, chars, min(links, chars)))
    return blocks


def main_blocks(blocks: list[Block], max_link_density: float = 0.3, tail_blocks: int = 1) -> list[bool]:
    """Which blocks are main text. Rules, each generic (measured in bench/extraction/bench_extract.py):
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
