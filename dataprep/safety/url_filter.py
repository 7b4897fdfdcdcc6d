"""URL filter: drop documents whose URL is on a domain blocklist or carries banned words.

Blocklists use the UT1 layout (the Université Toulouse 1 lists datatrove and FineWeb use): a root
folder with one folder per category, each holding ``domains`` (one domain per line) and optionally
``urls`` (``domain/path`` prefixes). We also read three word lists per category, datatrove-style:
``words`` (one URL token is enough), ``soft_words`` (``soft_word_threshold`` distinct tokens needed)
and ``subwords`` (substrings of the URL with punctuation removed). Any list file may be gzipped
(``domains.gz``), and a blocklist may also be a UT1 tarball: the official ``blacklists.tar.gz`` or the
merged copy inside datatrove's wheel (``datatrove/assets/url_filterblacklistsv0_3_0.tar.gz``, 4.5
million domains, category ``ut1``). Shipped in ``dataprep/assets/safety/blocklists``: small hand lists
for adult and gambling sites, and ``ut1``, the UT1 domains under Chinese, Japanese, Korean and
Cyrillic country domains (see the NOTICE there). Domains are kept as sorted 64-bit hashes
(``DomainSet``), loaded once per worker process. Drop reason: ``url_blocklist:<category>``.
"""

from __future__ import annotations

import gzip
import os
import re
import tarfile
from functools import lru_cache
from typing import Iterable, Iterator, NamedTuple
from urllib.parse import urlsplit

import numpy as np
import pyarrow as pa
import xxhash
from pydantic import Field, field_validator

from dataprep.core.errors import MissingPath
from dataprep.core.registry import register
from dataprep.core.stage import DocumentStage
from dataprep.core.storage import resolve_asset
from dataprep.safety.word_lists import ASSETS, literal_union

DEFAULT_BLOCKLISTS = ASSETS / "blocklists"
_NON_ALNUM = re.compile(r"[^a-z0-9]+")
LIST_KINDS = ("domains", "urls", "words", "soft_words", "subwords")


class DomainSet:
    """A domain list as a sorted array of 64-bit hashes: 8 bytes a domain, built once per worker
    process (millions of entries in a few seconds) and probed with a binary search."""

    def __init__(self, hashes: list[np.ndarray]) -> None:
        self.hashes = np.unique(np.concatenate(hashes)) if hashes else np.zeros(0, np.uint64)

    @classmethod
    def hash_all(cls, domains: Iterable[str]) -> np.ndarray:
        """Hashes of a stream of domains, a million at a time (never the whole list as strings)."""
        chunks, chunk = [], []
        for d in domains:
            chunk.append(d)
            if len(chunk) == 1 << 20:
                chunks.append(cls._hash(chunk))
                chunk = []
        chunks.append(cls._hash(chunk))
        return np.concatenate(chunks)

    @staticmethod
    def _hash(domains: list[str]) -> np.ndarray:
        return np.fromiter((xxhash.xxh64_intdigest(_domain(d).encode()) for d in domains), np.uint64, len(domains))

    def __len__(self) -> int:
        return len(self.hashes)

    def any_of(self, domains: list[str]) -> bool:
        if not domains or not len(self.hashes):
            return False
        keys = self._hash(domains)
        pos = np.minimum(np.searchsorted(self.hashes, keys), len(self.hashes) - 1)
        return bool((self.hashes[pos] == keys).any())


class Category(NamedTuple):
    domains: DomainSet
    url_prefixes: dict[str, tuple[str, ...]]  # host -> path prefixes
    words: frozenset[str]
    soft_words: frozenset[str]
    subwords: re.Pattern | None


def _domain(entry: str) -> str:
    entry = entry.strip().lower().rstrip(".")
    for prefix in ("*.", ".", "www."):
        entry = entry.removeprefix(prefix)
    return entry


def _lines(fh) -> Iterator[str]:
    for raw in fh:
        line = (raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw).strip()
        if line and not line.startswith("#"):
            yield line


def _read_optional(folder: str, name: str) -> Iterator[str]:
    """``name`` or ``name.gz`` in ``folder``, if there."""
    for path, opener in ((os.path.join(folder, name), open), (os.path.join(folder, name + ".gz"), gzip.open)):
        if os.path.isfile(path):
            with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
                yield from _lines(fh)


def _read_archive(path: str) -> Iterator[tuple[str, str, Iterator[str]]]:
    """(category, list kind, entries) for each list file in a UT1 tarball: the official one
    (``blacklists/<category>/domains``) or datatrove's merged copy (``domains`` at the top: ``ut1``)."""
    with tarfile.open(path, "r:*") as tar:
        for member in tar:
            parts = member.name.strip("./").split("/")
            if member.isfile() and parts[-1] in LIST_KINDS:
                category = parts[-2] if len(parts) > 1 and parts[-2] != "blacklists" else "ut1"
                yield category, parts[-1], _lines(tar.extractfile(member))


def _category_dirs(root: str) -> dict[str, str]:
    """A UT1 root (category sub-folders) or a single category folder (has a ``domains`` file)."""
    if not os.path.isdir(root):
        raise MissingPath(f"blocklist folder {root!r} does not exist")
    if any(os.path.isfile(os.path.join(root, name)) for name in ("domains", "domains.gz")):
        return {os.path.basename(os.path.normpath(root)): root}
    return {
        name: os.path.join(root, name) for name in sorted(os.listdir(root)) if os.path.isdir(os.path.join(root, name))
    }


def _sources(root: str) -> Iterator[tuple[str, str, Iterator[str]]]:
    if os.path.isfile(root):
        yield from _read_archive(root)
        return
    for name, folder in _category_dirs(root).items():
        for kind in LIST_KINDS:
            yield name, kind, _read_optional(folder, kind)


@lru_cache(maxsize=8)
def load_categories(roots: tuple[str, ...], categories: tuple[str, ...] | None) -> dict[str, Category]:
    """Merge the lists of every root (folder or tarball), per category; cached so each worker
    process reads them once."""
    domains: dict[str, list[np.ndarray]] = {}
    other: dict[str, dict[str, list[str]]] = {}
    for root in roots:
        for name, kind, entries in _sources(root):
            if categories is not None and name not in categories:
                continue
            lists = other.setdefault(name, {k: [] for k in LIST_KINDS if k != "domains"})
            domains.setdefault(name, [])
            if kind == "domains":
                domains[name].append(DomainSet.hash_all(entries))
            else:
                lists[kind] += entries
    out = {}
    for name, lists in other.items():
        prefixes: dict[str, list[str]] = {}
        for entry in lists["urls"]:
            host, _, path = _domain(entry).partition("/")
            prefixes.setdefault(host, []).append("/" + path)
        subwords = [_NON_ALNUM.sub("", w.lower()) for w in lists["subwords"]]
        out[name] = Category(
            domains=DomainSet(domains[name]),
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

    blocklists: list[str] = Field(
        default_factory=list, description="UT1-layout folders (root or one category) or UT1 tarballs"
    )
    categories: list[str] | None = Field(
        ["adult", "gambling", "ut1"], description="categories to apply; null = all found"
    )
    use_default_lists: bool = True  # include the small lists shipped with the package
    soft_word_threshold: int = Field(2, ge=1, description="distinct soft words in a URL needed to drop it")
    allow_domains: list[str] = Field(default_factory=list, description="never drop these domains or their subdomains")

    reads_text = False  # URLs only: it may run before extract

    @field_validator("blocklists")
    @classmethod
    def _exists(cls, paths: list[str]) -> list[str]:
        for path in paths:
            if not os.path.exists(path):  # fail at config time, naming the path
                raise ValueError(f"blocklist {path!r} does not exist")
            if not os.path.isdir(path) and not tarfile.is_tarfile(path):
                raise ValueError(f"blocklist {path!r} is neither a folder nor a tarball")
        return paths

    def _lists(self) -> dict[str, Category]:
        roots = ([str(DEFAULT_BLOCKLISTS)] if self.use_default_lists else []) + [
            os.path.abspath(resolve_asset(p)) for p in self.blocklists
        ]
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
            if cat.domains.any_of(suffixes):
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
