"""URL filter: drop documents whose URL is on a domain blocklist or carries banned words.

Blocklists use the UT1 layout (the Université Toulouse 1 lists datatrove and FineWeb use): a root
folder with one folder per category, each holding ``domains`` (one domain per line) and optionally
``urls`` (``domain/path`` prefixes). We also read three word lists per category, datatrove-style:
``words`` (one URL token is enough), ``soft_words`` (``soft_word_threshold`` distinct tokens needed)
and ``subwords`` (substrings of the URL with punctuation removed). A small default list for adult and
gambling sites ships in ``dataprep/assets/safety/blocklists``. Drop reason: ``url_blocklist:<category>``.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import NamedTuple
from urllib.parse import urlsplit

import pyarrow as pa
from pydantic import Field, field_validator

from dataprep.io import resolve_asset
from dataprep.safety import ASSETS, literal_union, read_list
from dataprep.stage import DocumentStage, register

DEFAULT_BLOCKLISTS = ASSETS / "blocklists"
_NON_ALNUM = re.compile(r"[^a-z0-9]+")


class Category(NamedTuple):
    domains: frozenset[str]
    url_prefixes: dict[str, tuple[str, ...]]  # host -> path prefixes
    words: frozenset[str]
    soft_words: frozenset[str]
    subwords: re.Pattern | None


def _domain(entry: str) -> str:
    entry = entry.strip().lower().rstrip(".")
    for prefix in ("*.", ".", "www."):
        entry = entry.removeprefix(prefix)
    return entry


def _read_optional(folder: str, name: str) -> list[str]:
    path = os.path.join(folder, name)
    return read_list(path) if os.path.isfile(path) else []


def _category_dirs(root: str) -> dict[str, str]:
    """A UT1 root (category sub-folders) or a single category folder (has a ``domains`` file)."""
    if not os.path.isdir(root):
        raise FileNotFoundError(f"blocklist folder {root!r} does not exist")
    if os.path.isfile(os.path.join(root, "domains")):
        return {os.path.basename(os.path.normpath(root)): root}
    return {name: os.path.join(root, name) for name in sorted(os.listdir(root)) if os.path.isdir(os.path.join(root, name))}


@lru_cache(maxsize=8)
def load_categories(roots: tuple[str, ...], categories: tuple[str, ...] | None) -> dict[str, Category]:
    """Merge the lists of every root, per category; cached so each worker process reads them once."""
    merged: dict[str, dict[str, list[str]]] = {}
    for root in roots:
        for name, folder in _category_dirs(root).items():
            if categories is not None and name not in categories:
                continue
            lists = merged.setdefault(name, {"domains": [], "urls": [], "words": [], "soft_words": [], "subwords": []})
            for kind in lists:
                lists[kind] += _read_optional(folder, kind)
    out = {}
    for name, lists in merged.items():
        prefixes: dict[str, list[str]] = {}
        for entry in lists["urls"]:
            host, _, path = _domain(entry).partition("/")
            prefixes.setdefault(host, []).append("/" + path)
        subwords = [_NON_ALNUM.sub("", w.lower()) for w in lists["subwords"]]
        out[name] = Category(
            domains=frozenset(_domain(d) for d in lists["domains"]),
            url_prefixes={h: tuple(p) for h, p in prefixes.items()},
            words=frozenset(w.lower() for w in lists["words"]),
            soft_words=frozenset(w.lower() for w in lists["soft_words"]),
            subwords=re.compile(literal_union(subwords)) if any(subwords) else None,
        )
    return out


def _host_and_path(url: str) -> tuple[str, str]:
    if "://" not in url:
        url = "//" + url
    try:
        parts = urlsplit(url.strip())
        host = (parts.hostname or "").rstrip(".")
    except ValueError:  # e.g. an unbalanced IPv6 bracket: judge the URL by its words only
        return "", ""
    return host.removeprefix("www."), parts.path or "/"


def _suffixes(host: str) -> list[str]:
    labels = host.split(".")
    return [".".join(labels[i:]) for i in range(len(labels))]


@register("url_filter")
class UrlFilter(DocumentStage):
    """Drop documents from blocklisted domains or with banned words in the URL."""

    blocklists: list[str] = Field(default_factory=list, description="UT1-layout folders (root or one category)")
    categories: list[str] | None = Field(["adult", "gambling"], description="categories to apply; null = all found")
    use_default_lists: bool = True  # include the small lists shipped with the package
    soft_word_threshold: int = Field(2, ge=1, description="distinct soft words in a URL needed to drop it")
    allow_domains: list[str] = Field(default_factory=list, description="never drop these domains or their subdomains")

    reads_text = False  # URLs only: it may run before extract

    @field_validator("blocklists")
    @classmethod
    def _exists(cls, paths: list[str]) -> list[str]:
        for path in paths:
            if not os.path.isdir(path):  # fail at config time, naming the folder
                raise ValueError(f"blocklist folder {path!r} does not exist")
        return paths

    def _lists(self) -> dict[str, Category]:
        roots = ([str(DEFAULT_BLOCKLISTS)] if self.use_default_lists else []) + [os.path.abspath(resolve_asset(p)) for p in self.blocklists]
        return load_categories(tuple(roots), tuple(self.categories) if self.categories is not None else None)

    def asset_paths(self) -> list[str]:
        return list(self.blocklists)

    def reason_for(self, url: str, lists: dict[str, Category]) -> str | None:
        if not url:
            return None
        host, path = _host_and_path(url)
        suffixes = _suffixes(host) if host else []
        allowed = {_domain(d) for d in self.allow_domains}
        if any(s in allowed for s in suffixes):
            return None
        lowered = url.lower()
        tokens = set(_NON_ALNUM.split(lowered))
        squashed = _NON_ALNUM.sub("", lowered)
        for name, cat in lists.items():
            if any(s in cat.domains for s in suffixes):
                return f"url_blocklist:{name}"
            if any(path.startswith(p) for s in suffixes for p in cat.url_prefixes.get(s, ())):
                return f"url_blocklist:{name}"
            if tokens & cat.words or len(tokens & cat.soft_words) >= self.soft_word_threshold:
                return f"url_blocklist:{name}"
            if cat.subwords is not None and cat.subwords.search(squashed):
                return f"url_blocklist:{name}"
        return None

    def process(self, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
        lists = self._lists()
        urls = batch.column("url").to_pylist() if "url" in batch.column_names else [None] * batch.num_rows
        return batch, [self.reason_for(url or "", lists) for url in urls]
