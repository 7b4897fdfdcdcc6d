"""URL dedup: one document per normalized URL, the latest fetch or the longest text.

The same page crawled twice (two snapshots, http and https, with and without ``www.``, a tracking
parameter appended) is one URL after ``normalize_url``; the copy kept is the latest fetch (``date``;
ties: the longer text) or the longest text (ties: the later fetch), then the smallest id. Documents
without a usable URL are never duplicates. Columns added: ``url_cluster`` (the id kept for the URL)
and ``url_cluster_size``.

One definition, run by both runners: ``prepare`` (key rows), ``decide`` (its Spark form,
``pipelines.decisions.url_dedup``, is the same rule as a window over the URL key; test_dedup_urls.py
checks that both keep the same documents) and ``applier``.
"""

from __future__ import annotations

import fnmatch
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import ClassVar, Literal
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

import pyarrow as pa
from pydantic import Field

from dataprep.core.errors import UsageError
from dataprep.core.registry import register
from dataprep.core.stage import GlobalStage
from dataprep.dedup.marks import MarkDuplicates

REASON = "url_duplicate"
CLUSTER = "url_cluster"
CLUSTER_SIZE = "url_cluster_size"
_DEFAULT_PORTS = {"http": 80, "https": 443}
_PATH_SAFE = "/:@!$&'()*+,;=-._~"  # RFC 3986 pchar: left as they are, everything else %-encoded


def normalize_url(
    url: str | None, strip_www: bool = True, drop_query: bool = False, drop_params: tuple[str, ...] = ()
) -> str | None:
    """A key equal for URLs that name the same page: scheme and fragment dropped, host lowercased
    without a trailing dot (and ``www.``), default port dropped, percent-encoding made canonical,
    trailing slash dropped, query parameters sorted without those matching ``drop_params`` (globs).
    None for a URL without a usable host."""
    if not url:
        return None
    try:
        parts = urlsplit(url.strip() if "://" in url else "//" + url.strip())
        host, port = (parts.hostname or "").rstrip("."), parts.port
    except ValueError:  # a bad port or an unbalanced IPv6 bracket
        return None
    if not host or any(c.isspace() for c in host):
        return None
    if strip_www:
        host = host.removeprefix("www.")
    if port and port != _DEFAULT_PORTS.get(parts.scheme.lower()):
        host = f"{host}:{port}"
    path = quote(unquote(parts.path), safe=_PATH_SAFE).rstrip("/") or "/"
    query = [] if drop_query else parse_qsl(parts.query, keep_blank_values=True)
    query = sorted((k, v) for k, v in query if not any(fnmatch.fnmatchcase(k.lower(), p) for p in drop_params))
    return f"{host}{path}" + (f"?{urlencode(query)}" if query else "")


def fetch_time(date: str | None) -> str:
    """``date`` (ISO 8601 as in WARC-Date, or an HTTP date) as a sortable UTC string; "" (earliest)
    when missing or unreadable."""
    if not date:
        return ""
    try:
        when = datetime.fromisoformat(date.strip())
    except ValueError:
        try:
            when = parsedate_to_datetime(date)
        except (TypeError, ValueError):
            return ""
    if when.tzinfo is not None:
        when = when.astimezone(timezone.utc).replace(tzinfo=None)
    return when.isoformat(timespec="seconds")


@register("url_dedup")
class UrlDedup(GlobalStage):
    """Keep one document per normalized URL: the latest fetch or the longest text."""

    keep: Literal["latest", "longest"] = Field(
        "latest", description="latest: by date (ties: longer text); longest: by text length (ties: later date)"
    )
    strip_www: bool = True
    drop_query: bool = Field(False, description="ignore the whole query string")
    drop_params: list[str] = Field(
        ["utm_*", "fbclid", "gclid", "dclid", "msclkid", "yclid", "mc_cid", "mc_eid", "_ga"],
        description="query parameters (globs, lowercase) that never tell pages apart",
    )

    def url_key(self, url: str | None) -> str | None:
        return normalize_url(url, self.strip_www, self.drop_query, tuple(self.drop_params))

    def key_batch(
        self, ids: list[str], urls: list[str | None], dates: list[str | None], lengths: list[int]
    ) -> pa.RecordBatch:
        """(id, url_key, fetched, length) for documents with a usable URL: what Spark shuffles."""
        rows = [(i, self.url_key(u), fetch_time(d), n or 0) for i, u, d, n in zip(ids, urls, dates, lengths)]
        rows = [r for r in rows if r[1] is not None]
        columns = list(zip(*rows)) if rows else [[], [], [], []]
        types = [pa.string(), pa.string(), pa.string(), pa.int64()]
        return pa.RecordBatch.from_arrays(
            [pa.array(c, t) for c, t in zip(columns, types)], names=["id", "url_key", "fetched", "length"]
        )

    @property
    def preference(self) -> tuple[str, str]:
        """The two columns that pick the kept copy, both largest first (then the smallest id)."""
        return ("fetched", "length") if self.keep == "latest" else ("length", "fetched")

    prepared_schema: ClassVar[pa.Schema] = pa.schema(
        [("id", pa.string()), ("url_key", pa.string()), ("fetched", pa.string()), ("length", pa.int64())]
    )

    def prepare(self, documents: pa.Table) -> pa.Table:
        """The key row of each document with a usable URL. Given a ``length`` column instead of the
        texts (Spark computes it on the JVM, so the texts never reach Python), that is the length."""
        if "length" in documents.column_names:
            lengths = documents.column("length").to_pylist()
        else:
            lengths = [len(t) if t else 0 for t in documents.column("text").to_pylist()]
        columns = (documents.column(c).to_pylist() for c in ("id", "url", "date"))
        return pa.Table.from_batches([self.key_batch(*columns, lengths)])

    def decide(self, prepared: pa.Table, documents: pa.Table) -> tuple[pa.Table, dict]:
        """Cluster rows of the URLs shared by 2+ documents: the preferred copy is kept, then the smallest id."""
        if documents.column("id").null_count:
            raise UsageError("url_dedup: every document needs a non-null id")
        groups: dict[str, list[dict]] = {}
        for row in sorted(prepared.to_pylist(), key=lambda r: r["id"]):
            groups.setdefault(row["url_key"], []).append(row)
        first, second = self.preference
        rows = []
        for members in (m for m in groups.values() if len(m) > 1):
            best = sorted(members, key=lambda r: (r[first], r[second]), reverse=True)[0]  # stable: smallest id on ties
            rows += [(r["id"], best["id"], len(members)) for r in members]
        columns = list(zip(*rows)) if rows else [[], [], []]
        return pa.table(
            {
                "id": pa.array(columns[0], pa.string()),
                CLUSTER: pa.array(columns[1], pa.string()),
                CLUSTER_SIZE: pa.array(columns[2], pa.int64()),
            }
        ), {}

    def applier(self, state: dict) -> MarkDuplicates:
        return MarkDuplicates(self.name, REASON, CLUSTER, CLUSTER_SIZE)
