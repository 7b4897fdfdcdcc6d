"""URL dedup on trafilatura-eval's real URLs: spelling variants of one URL are one page, the configured
copy is kept, different pages are not merged; Spark agrees with the in-memory run."""

from __future__ import annotations

import random

import pytest

from dataprep.dedup.urls import REASON, UrlDedup, fetch_time, normalize_url
from dedup_corpus import doc_table, eval_pages


def test_normalize_url():
    key = normalize_url("https://www.Example.COM./a%7eb/?utm_source=x&b=2&a=1#top", drop_params=("utm_*",))
    assert key == normalize_url("http://example.com:80/a~b?a=1&b=2") == "example.com/a~b?a=1&b=2"
    assert normalize_url("http://example.com:8080/a") == "example.com:8080/a"
    assert normalize_url("example.com/A") != normalize_url("example.com/a")  # paths are case-sensitive
    assert normalize_url("https://example.com/?id=1") != normalize_url("https://example.com/?id=2")
    assert normalize_url("https://example.com/?id=1", drop_query=True) == "example.com/"
    assert normalize_url(None) is normalize_url("not a url/") is normalize_url("http://[::1/") is None


def test_fetch_time_sorts_any_zone_or_format():
    assert fetch_time("2024-05-20T12:00:00Z") == "2024-05-20T12:00:00" == fetch_time("2024-05-20T14:00:00+02:00")
    assert fetch_time("Mon, 20 May 2024 12:00:00 GMT") == "2024-05-20T12:00:00"
    assert fetch_time("yesterday") == fetch_time(None) == ""


def _variants(url: str) -> list[str]:
    scheme, rest = url.split("://", 1)
    other = "http" if scheme == "https" else "https"
    host, _, path = rest.partition("/")
    www = host[4:] if host.startswith("www.") else "www." + host
    return [
        f"{other}://{host}/{path}",
        f"{scheme}://{www.upper()}/{path}#comments",
        f"{scheme}://{host}/{path}" + ("&" if "?" in path else "?") + "utm_source=feed",
    ]


@pytest.fixture(scope="module")
def crawl(shared_data):
    """Documents for trafilatura-eval's pages (text: their main-text snippets), 30 of them fetched
    again under other spellings of the URL, on other dates, with more or less text."""
    pages = [p for p in eval_pages(shared_data) if p["url"].startswith("http")]
    docs, urls, dates, copies = {}, {}, {}, {}
    for i, page in enumerate(pages):
        doc = f"p{i:03d}"
        docs[doc], urls[doc], dates[doc] = "\n".join(page["with"]), page["url"], "2024-01-15T10:00:00Z"
    rng = random.Random(11)
    for i in rng.sample(range(len(pages)), 30):
        original = f"p{i:03d}"
        group = [original]
        for k, url in enumerate(_variants(pages[i]["url"])):
            doc = f"{original}-v{k}"
            docs[doc], urls[doc] = docs[original][: rng.randrange(1, len(docs[original]) + 1)], url
            dates[doc] = f"2024-0{rng.randrange(2, 9)}-{rng.randrange(10, 28)}T0{k}:00:00+01:00"
            group.append(doc)
        copies[original] = group
    docs["no-url"], urls["no-url"] = "no address", ""
    return doc_table(docs, urls, dates), copies, dates


def _kept(result) -> set[str]:
    return set(result.kept.column("id").to_pylist())


@pytest.mark.parametrize("keep", ["latest", "longest"])
def test_one_document_per_url_the_configured_copy(crawl, keep):
    table, copies, dates = crawl
    texts = dict(zip(table.column("id").to_pylist(), table.column("text").to_pylist()))
    result = UrlDedup(keep=keep).run_local(table)
    kept = _kept(result)
    for group in copies.values():
        if keep == "latest":
            best = max(group, key=lambda d: (fetch_time(dates[d]), len(texts[d])))
        else:
            best = max(group, key=lambda d: (len(texts[d]), fetch_time(dates[d])))
        assert kept & set(group) == {best}
    assert len(kept) == table.num_rows - 3 * len(copies)  # every other page, and the one without a URL
    assert set(result.dropped.column("drop_reason").to_pylist()) == {REASON}
    sizes = dict(zip(result.kept.column("id").to_pylist(), result.kept.column("url_cluster_size").to_pylist()))
    assert sizes["no-url"] == 1 and {sizes[d] for g in copies.values() for d in g if d in kept} == {4}


def test_spark_matches_local_for_any_partitioning(spark, crawl):
    from pipelines.global_runners import run_global

    table, _, _ = crawl
    local = UrlDedup().run_local(table)
    expected = dict(zip(local.dropped.column("id").to_pylist(), local.dropped.column("url_cluster").to_pylist()))
    df = spark.createDataFrame(table.to_pandas())
    for partitions in (1, 4):
        rows = run_global(df.repartition(partitions), UrlDedup()).collect()
        assert {r.id for r in rows if r.drop_reason is None} == _kept(local)
        assert {(r.id, r.text) for r in rows if r.drop_reason is None} == set(
            zip(*(local.kept.column(c).to_pylist() for c in ("id", "text")))
        )
        assert {r.id: r.url_cluster for r in rows if r.drop_reason} == expected
