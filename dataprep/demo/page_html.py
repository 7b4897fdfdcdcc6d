"""A demo page as the full HTML document a crawler fetches: the article inside localized site chrome (cookie
banner, navigation, sidebar and footer), from the templates and ``chrome.yaml`` in ``assets/demo/``."""

from __future__ import annotations

import html
import zlib
from functools import lru_cache
from string import Template

from dataprep.demo.pages import ASSETS, DemoPage, read_asset


def _paragraphs(text: str) -> str:
    blocks = [b.strip() for b in text.split("\n\n") if b.strip()]
    return "\n".join("<p>" + "<br>\n".join(html.escape(line) for line in b.splitlines()) + "</p>" for b in blocks)


def _links(items: list[str], prefix: str = "/") -> str:
    return "".join(f'<li><a href="{prefix}{i}">{html.escape(t)}</a></li>' for i, t in enumerate(items))


def render_html(page: DemoPage, related: list[str] = ()) -> str:
    """The full HTML document of a page: article inside localized site chrome. Two layouts (semantic
    HTML5 and an older div-based theme) chosen per site, so extraction is not tuned to one template."""
    chrome = _read_chrome()
    c = chrome.get(page.lang, chrome["en"])
    e = html.escape
    byline = ""
    if page.author or page.date:
        byline = (
            f'<p class="byline">{e(c["by"])} <span class="author">{e(page.author or page.site)}</span>'
            f' &middot; <time datetime="{page.date or ""}">{page.date or ""}</time></p>'
        )
    slots = {
        "lang": page.lang,
        "charset": page.charset,
        "title": e(page.title),
        "site": e(page.site),
        "description": e(" ".join(page.text.split())[:150], quote=True),
        "canonical": e(page.source or page.url, quote=True),
        "skip": e(c["skip"]),
        "search": e(c["search"]),
        "home": e(c["home"]),
        "section": e(c["nav"][2]),
        "ad": e(c["ad"]),
        "nav": _links(c["nav"]),
        "byline": byline,
        "body": page.main_html if page.main_html is not None else _paragraphs(page.text),
        "cookie": (
            f'<p>{e(c["cookie"])}</p><button class="accept">{e(c["accept"])}</button> '
            f'<button class="reject">{e(c["reject"])}</button>'
        ),
        "share": (
            f'<div class="share">{e(c["share"])}: <a href="#">Facebook</a> <a href="#">X</a> '
            f'<a href="#">WhatsApp</a> <a href="#">Email</a></div>'
        ),
        "most_read": f"<h3>{e(c['most_read'])}</h3><ol>{_links(related, '/read/')}</ol>" if related else "",
        "newsletter": (
            f'<div class="newsletter"><p>{e(c["newsletter"])}</p><input type="email" name="email">'
            f"<button>{e(c['subscribe'])}</button></div>"
        ),
        "footer": f"<ul>{_links(c['footer'], '/legal/')}</ul><p>&copy; 2024 {e(page.site)}. {e(c['rights'])}</p>",
    }
    slots["head"] = _template("head.html").substitute(slots)
    layout = ("modern.html", "classic.html")[zlib.crc32(page.site.encode()) % 2]
    return _template(layout).substitute(slots)


@lru_cache(maxsize=None)
def _template(name: str) -> Template:
    return Template((ASSETS / "templates" / name).read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _read_chrome() -> dict:
    return read_asset("chrome.yaml")
