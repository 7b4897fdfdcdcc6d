"""MediaWiki XML export dumps (``pages-articles*.xml``, ``.bz2``, multistream too) -> one document per article.

The dump is cut into pages by their ``<page>`` / ``</page>`` lines and each page is parsed alone, so memory
holds one page, a broken page is one dropped row (``error:malformed_record``) and the pages after it are
kept, and a dump cut short (a truncated ``.bz2``) keeps every page before the damage plus one
``error:truncated`` row. Only namespace 0 (articles) makes documents; pages of other namespaces are
counted as skipped records (``namespace_N``). Redirects are dropped as ``redirect``, disambiguation pages
as ``disambiguation``. Wikitext becomes plain text with mwparserfromhell: templates (infoboxes included),
tables, references, comments, categories, file and interlanguage links removed; section titles, list
items and link text kept. The id is ``<dbname>-<page id>`` (stable across dumps), the url the site's base
plus the title when the dump's ``<siteinfo>`` names it, the date the revision's timestamp.
"""

from __future__ import annotations

import bz2
import gzip
import logging
import re
import xml.etree.ElementTree as ET
import zlib
from typing import Iterator
from urllib.parse import quote

from dataprep.core.config import InputConfig
from dataprep.core.extras import install_command
from dataprep.core.stage import StageResult
from dataprep.core.stats import RECORDS_SKIPPED
from dataprep.core.storage import open_stream
from dataprep.readers.batches import Batches, bounded_lines, hash_id

log = logging.getLogger(__name__)
KIND = "wikipedia"

# Template names (lower case, spaces) that mark a disambiguation page, in several language editions.
DISAMBIGUATION_TEMPLATES = {
    "disambiguation",
    "disambig",
    "dab",
    "disamb",
    "dbig",
    "hndis",
    "geodis",
    "surname",
    "given name",
    "letter disambiguation",
    "number disambiguation",
    "place name disambiguation",
    "school disambiguation",
    "begriffsklärung",
    "homonymie",
    "desambiguación",
    "desambiguacao",
    "desambiguação",
    "disambigua",
    "doorverwijspagina",
    "dp",
    "ujednoznacznienie",
    "неоднозначность",
    "многозначность",
    "曖昧さ回避",
    "消歧义",
    "消歧義",
    "disambiguazione",
    "täsmennyssivu",
    "förgrening",
    "peker",
    "flertydig",
}
# Link prefixes whose links are not prose: files, categories (several editions). Interlanguage links
# (``[[fr:...]]``) are recognised by their language-code prefix.
DROPPED_LINK_PREFIXES = {
    "file",
    "image",
    "media",
    "category",
    "datei",
    "bild",
    "kategorie",
    "fichier",
    "catégorie",
    "archivo",
    "imagen",
    "categoría",
    "immagine",
    "categoria",
    "ficheiro",
    "arquivo",
    "bestand",
    "categorie",
    "plik",
    "kategoria",
    "файл",
    "изображение",
    "категория",
    "ファイル",
    "画像",
    "カテゴリ",
    "文件",
    "分类",
    "分類",
}
_LANGUAGE_PREFIX = re.compile(r"^[a-z]{2,3}(-[a-z]+)*$")
# Tags whose content is no prose: references, tables, galleries, formulas, scores, ...
DROPPED_TAGS = {
    "ref",
    "references",
    "table",
    "gallery",
    "math",
    "chem",
    "score",
    "timeline",
    "imagemap",
    "syntaxhighlight",
    "source",
    "graph",
    "mapframe",
    "templatedata",
    "noinclude",
}
_MAGIC_WORD = re.compile(r"__[A-Z]+__")
_BLANK_LINES = re.compile(r"\n{3,}")
HEADING = "\x00"  # marks a section title line (then its level) until empty sections are dropped


def read_wikipedia(path: str, cfg: InputConfig, out: Batches) -> Iterator[StageResult]:
    out.kind = KIND
    _parser()  # a missing parser fails the task before its first page, not every page as an error
    site = {"dbname": None, "base": None}
    n = 0
    with open_stream(path, decompress=False) as raw:
        fh = decompressed(raw, path)
        lines: list[bytes] = []
        size = 0
        inside = None  # "page", "siteinfo" or None
        try:
            for line in bounded_lines(fh, cfg.max_document_bytes * 2 + 65536):
                if line is None:  # a line too long to hold: its page is too large (outside one: a page of one line)
                    if inside:
                        size += cfg.max_document_bytes * 2 + 1
                    else:
                        n += 1
                        out.drop("too_large", id=hash_id(path, n))
                    continue
                stripped = line.strip()
                if inside is None:
                    if stripped.startswith(b"<page"):
                        inside, lines, size = "page", [], 0
                    elif stripped.startswith(b"<siteinfo"):
                        inside, lines, size = "siteinfo", [], 0
                    else:
                        continue
                size += len(line)
                if size <= cfg.max_document_bytes * 2:  # an enormous page is not held, only counted
                    lines.append(line)
                if inside == "siteinfo" and stripped.endswith(b"</siteinfo>"):
                    site.update(_siteinfo(b"".join(lines)))
                    inside = None
                elif inside == "page" and stripped.endswith(b"</page>"):
                    if out.full():
                        yield out.flush()
                    n += 1
                    out.bytes_read += size
                    if size > cfg.max_document_bytes * 2:
                        out.drop("too_large", id=hash_id(path, n))
                    else:
                        _page(b"".join(lines), path, n, site, out)
                    inside = None
        except (EOFError, OSError, zlib.error) as exc:  # a truncated or corrupt compressed dump
            log.warning("%s: error:truncated after %d pages: %s", path, n, exc)
            out.drop("error:truncated", exc, id=hash_id(path, -1))
            return
    if inside == "page":  # the file ends inside a page
        log.warning("%s: error:truncated after %d pages", path, n)
        out.drop("error:truncated", id=hash_id(path, -1))


def decompressed(raw, path: str):
    """bz2 (multistream dumps are concatenated streams, which BZ2File reads on), gzip or plain XML."""
    if path.endswith(".bz2"):
        return bz2.BZ2File(raw)
    return gzip.GzipFile(fileobj=raw) if path.endswith(".gz") else raw


def _siteinfo(xml: bytes) -> dict:
    try:
        info = ET.fromstring(xml)
    except ET.ParseError:
        return {}
    base = info.findtext("base") or ""
    return {"dbname": info.findtext("dbname"), "base": base.rsplit("/", 1)[0] + "/" if "/wiki/" in base else None}


def _page(xml: bytes, path: str, n: int, site: dict, out: Batches) -> None:
    try:
        page = ET.fromstring(xml)
    except ET.ParseError as exc:
        out.drop("error:malformed_record", exc, id=hash_id(path, n))
        return
    ns = (page.findtext("ns") or "0").strip()
    if ns != "0":
        out.counters[f"{RECORDS_SKIPPED}namespace_{ns}"] += 1
        return
    page_id = (page.findtext("id") or "").strip()
    title = page.findtext("title") or ""
    row = {
        "id": f"{site['dbname'] or 'wiki'}-{page_id}" if page_id else hash_id(path, n),
        "url": site["base"] + quote(title.replace(" ", "_")) if site["base"] and title else None,
        "date": page.findtext("revision/timestamp"),
    }
    wikitext = page.findtext("revision/text") or ""
    if page.find("redirect") is not None or wikitext.lstrip()[:9].upper() == "#REDIRECT":
        return out.drop("redirect", **row)
    try:
        text, disambiguation = wikitext_to_text(wikitext)
    except Exception as exc:  # noqa: BLE001 - one page the parser cannot take must not end the dump
        return out.drop(f"error:{type(exc).__name__}", exc, **row)
    if disambiguation:
        return out.drop("disambiguation", **row)
    if not text.strip():
        return out.drop("empty", **row)
    text = f"{title}\n\n{text}" if title else text
    out.keep(text=text, **row)


def wikitext_to_text(wikitext: str) -> tuple[str, bool]:
    """Plain text of an article's wikitext, and whether it is a disambiguation page."""
    code = _parser().parse(wikitext)
    names = {str(t.name).strip().lower().replace("_", " ") for t in code.filter_templates(recursive=False)}
    disambiguation = bool(names & DISAMBIGUATION_TEMPLATES) or "__DISAMBIG__" in wikitext
    lines = [" ".join(line.split()) for line in _MAGIC_WORD.sub("", _plain(code)).splitlines()]
    lines = [line for line in lines if line]
    # A section left empty (References, once its list is gone) loses its title; a parent of subsections keeps it.
    kept: list[str] = []
    for line in reversed(lines):
        if line.startswith(HEADING) and (not kept or kept[-1].startswith(HEADING) and kept[-1][1] <= line[1]):
            continue
        kept.append(line)
    text = "\n".join(f"\n{line[2:]}\n" if line.startswith(HEADING) else line for line in reversed(kept))
    return _BLANK_LINES.sub("\n\n", text).strip(), disambiguation


def _parser():
    """mwparserfromhell, imported on first use: the other readers work without it."""
    try:
        import mwparserfromhell
    except ImportError as exc:
        raise ImportError(
            f"reading Wikipedia dumps needs mwparserfromhell: {install_command('mwparserfromhell')}"
        ) from exc
    return mwparserfromhell


def _plain(code) -> str:
    return "".join(_node_text(node) for node in code.nodes)


def _node_text(node) -> str:
    kind = type(node).__name__  # mwparserfromhell's node classes, by name: no import needed here
    if kind == "Text":
        return node.value
    if kind == "Wikilink":
        title = str(node.title).strip()
        prefix, colon, _ = title.partition(":")
        prefix = prefix.strip().lower()
        if colon and (prefix in DROPPED_LINK_PREFIXES or _LANGUAGE_PREFIX.match(prefix)):
            return ""
        return _plain(node.text) if node.text is not None else title.lstrip(":").split("#")[0] or title
    if kind == "ExternalLink":
        return _plain(node.title) if node.title is not None else ""
    if kind == "Heading":
        return f"\n{HEADING}{min(node.level, 6)}{_plain(node.title).strip()}\n"
    if kind == "Tag":
        tag = str(node.tag).strip().lower()
        if tag in DROPPED_TAGS:
            return ""
        if tag == "li":
            return "- "
        if tag == "br":
            return "\n"
        return _plain(node.contents) if node.contents is not None else ""
    if kind == "HTMLEntity":
        return node.normalize()
    return ""  # templates, comments, template arguments
