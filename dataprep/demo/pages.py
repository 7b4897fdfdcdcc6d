"""The demo's pages: the texts in ``assets/demo/`` read, their near and exact duplicates made, and all of
them checked (unique URLs, planted PII present, text the declared charset can hold).

Every stage of the pipeline finds something to keep and something to drop among them: good articles in six
languages and three charsets, near and exact duplicates, boilerplate, spam, planted PII, toxic posts and
blocked hostnames.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from functools import lru_cache
from pathlib import Path

import yaml

ASSETS = Path(__file__).resolve().parents[1] / "assets" / "demo"
# asset file -> category of its pages (duplicates.yaml holds two categories)
PAGE_FILES = {
    "good_en.yaml": "good",
    "good_multilingual.yaml": "good",
    "pii.yaml": "pii",
    "boilerplate.yaml": "boilerplate",
    "spam.yaml": "spam",
    "toxic.yaml": "toxic",
    "blocked_urls.yaml": "blocked_url",
}


@dataclass(frozen=True)
class DemoPage:
    """One HTML page of the demo crawl; ``text`` is the article prose as written (paragraphs split by
    blank lines), ``pii`` the planted (kind, value) pairs, ``source`` the original of a duplicate."""

    url: str
    category: str
    lang: str
    site: str
    title: str
    text: str = ""
    main_html: str | None = None
    charset: str = "utf-8"
    header_charset: bool = True
    date: str | None = None
    author: str | None = None
    kind: str | None = None
    source: str | None = None
    pii: tuple[tuple[str, str], ...] = ()


def read_asset(name: str):
    """One YAML file of ``assets/demo/``."""
    with open(ASSETS / name, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def _page(entry: dict, category: str, where: str) -> DemoPage:
    for key in ("url", "site", "title", "lang"):
        if not entry.get(key):
            raise ValueError(f"{where}: page {entry.get('url', '?')!r} lacks {key!r}")
    unknown = set(entry) - {f.name for f in fields(DemoPage)} | ({"category"} & set(entry))
    if unknown:
        raise ValueError(f"{where}: page {entry['url']!r} has unknown keys {sorted(unknown)}")
    pii = tuple((item["kind"], str(item["value"])) for item in entry.get("pii", ()))
    return DemoPage(category=category, pii=pii, **{k: v for k, v in entry.items() if k != "pii"})


@lru_cache(maxsize=1)
def _load() -> tuple[DemoPage, ...]:
    pages: list[DemoPage] = []
    for name, category in PAGE_FILES.items():
        pages += [_page(entry, category, name) for entry in read_asset(name)]
    by_url = {p.url: p for p in pages}
    dups = read_asset("duplicates.yaml")
    for entry in dups["near_duplicates"]:
        original = by_url[entry["source"]]
        text = original.text
        for old, new in entry["edits"]:
            if text.count(old) != 1:
                raise ValueError(f"duplicates.yaml: edit {old!r} must occur once in {original.url}")
            text = text.replace(old, new)
        extra = {k: entry[k] for k in ("site", "title", "author") if k in entry}
        pages.append(
            replace(original, url=entry["url"], category="near_duplicate", text=text, source=original.url, **extra)
        )
    for entry in dups["exact_duplicates"]:
        original = by_url[entry["source"]]
        pages.append(replace(original, url=entry["url"], category="exact_duplicate", source=original.url))
    _validate(pages)
    return tuple(pages)


def _validate(pages: list[DemoPage]) -> None:
    """Catch asset mistakes early: duplicate URLs, PII not in the text, text the charset cannot hold."""
    seen: set[str] = set()
    for page in pages:
        if page.url in seen:
            raise ValueError(f"demo page URL {page.url} appears twice")
        seen.add(page.url)
        for kind, value in page.pii:
            if value not in page.text:
                raise ValueError(f"{page.url}: planted {kind} {value!r} is not in the text")
        (page.title + page.text + page.site + (page.author or "")).encode(page.charset)  # strict


def load_pages(category: str | None = None) -> list[DemoPage]:
    """All HTML pages of the demo crawl in WARC order (originals before their duplicates)."""
    return [p for p in _load() if category is None or p.category == category]


def planted_pii() -> list[tuple[str, str, str]]:
    """(url, kind, value) for every fake personal datum planted in the demo pages."""
    return [(p.url, kind, value) for p in _load() for kind, value in p.pii]
