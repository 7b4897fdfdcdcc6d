"""The demo corpus: a small gzipped WARC/1.1 crawl of the demo pages, and a reference corpus for the
perplexity model.

Crawled data cannot be committed, so ``dataprep demo-data`` renders the pages written for the purpose into
realistic HTML, wraps each page in request/response records with real HTTP headers, and adds non-HTML
responses and a revisit record. The output is byte-for-byte reproducible (fixed dates, ids and gzip headers).
"""

from __future__ import annotations

import gzip
import json
import struct
import zlib
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from urllib.parse import urlsplit

from dataprep.core.storage import atomic_write_bytes
from dataprep.demo.page_html import render_html
from dataprep.demo.pages import DemoPage, load_pages
from dataprep.readers.warc_writer import record_id, sha1_digest, warc_date, warc_record

FILENAME = "demo.warc.gz"
CRAWL_START = datetime(2024, 6, 20, 8, 0, 0, tzinfo=timezone.utc)
USER_AGENT = "Mozilla/5.0 (compatible; ccpretrain-demo/0.1; +https://github.com/ccpretrain)"
# Served as non-HTML payloads: the reader must skip them (and count the skip).
BINARY_URLS = {
    "https://www.riverside-gazette.com/static/img/logo.png": "image/png",
    "https://www.pastandpresent-history.org/downloads/annual-report-2023.pdf": "application/pdf",
}
# Re-crawled later with an identical payload: written as a revisit record, which carries no body.
REVISIT_URL = "https://www.riverside-gazette.com/news/2024/05/bus-route-changes-north-district"


# ---------------------------------------------------------------------------------------- binary payloads


def _png(width: int = 16, height: int = 16) -> bytes:
    """A valid solid-colour PNG, generated rather than shipped."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    rows = b"".join(b"\x00" + b"\xc8\x3c\x28" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def _pdf(text: str = "Past and Present: annual report 2023") -> bytes:
    """A valid one-page PDF with a correct cross-reference table."""
    stream = f"BT /F1 18 Tf 72 720 Td ({text}) Tj ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


# ---------------------------------------------------------------------------------------- WARC


def _record(kind: str, rid: str, when: datetime, headers: dict, block: bytes, payload: bytes | None = None) -> bytes:
    """One WARC record as its own gzip member (what Common Crawl writes, so readers can seek)."""
    fields = {"WARC-Date": warc_date(when), "WARC-Record-ID": rid, "Content-Length": None, **headers}
    record = warc_record(kind, fields, block, block_digest=True, payload=payload)
    return gzip.compress(record, compresslevel=9, mtime=0)


def _http_response(content_type: str, body: bytes, when: datetime, last_modified: str | None, host: str) -> bytes:
    server = ("nginx/1.24.0", "Apache/2.4.58 (Debian)", "cloudflare")[zlib.crc32(host.encode()) % 3]
    lines = [
        "HTTP/1.1 200 OK",
        f"Date: {format_datetime(when, usegmt=True)}",
        f"Server: {server}",
        f"Content-Type: {content_type}",
        f"Content-Length: {len(body)}",
    ]
    if last_modified:
        modified = datetime.fromisoformat(last_modified).replace(hour=6, tzinfo=timezone.utc)
        lines.append(f"Last-Modified: {format_datetime(modified, usegmt=True)}")
    lines += ["Cache-Control: public, max-age=600", "X-Crawler-Content-Encoding: gzip", "Connection: close"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def _http_request(url: str, lang: str) -> bytes:
    parts = urlsplit(url)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    lines = [
        f"GET {target or '/'} HTTP/1.1",
        f"Host: {parts.netloc}",
        f"User-Agent: {USER_AGENT}",
        "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
        f"Accept-Language: {'en-US,en' if lang == 'en' else lang + ',en'};q=0.5",
        "Accept-Encoding: br,gzip",
        "Connection: close",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _exchange(
    url: str, lang: str, content_type: str, body: bytes, when: datetime, date: str | None, warcinfo_id: str
) -> tuple[bytes, bytes]:
    """A request/response pair for one fetch, linked by WARC-Concurrent-To as crawlers write them."""
    host = urlsplit(url).netloc
    request_id, response_id = record_id("request " + url), record_id("response " + url)
    common = {
        "WARC-Warcinfo-ID": warcinfo_id,
        "WARC-IP-Address": f"198.51.100.{zlib.crc32(host.encode()) % 254 + 1}",
        "WARC-Target-URI": url,
    }
    request = _record(
        "request",
        request_id,
        when,
        {**common, "Content-Type": "application/http; msgtype=request"},
        _http_request(url, lang),
    )
    response = _record(
        "response",
        response_id,
        when + timedelta(milliseconds=250),
        {
            **common,
            "WARC-Concurrent-To": request_id,
            "Content-Type": "application/http; msgtype=response",
            "WARC-Identified-Payload-Type": content_type.split(";")[0],
        },
        _http_response(content_type, body, when, date, host),
        payload=body,
    )
    return request, response


def _encoded(page: DemoPage, related: list[str]) -> tuple[str, bytes]:
    body = render_html(page, related).encode(page.charset, errors="xmlcharrefreplace")
    content_type = f"text/html; charset={page.charset.upper()}" if page.header_charset else "text/html"
    return content_type, body


def write_demo_warc(path: str) -> dict[str, int]:
    """Write the demo crawl to ``path`` (gzipped WARC/1.1, one gzip member per record) atomically;
    return how many fetches of each category it holds (a page is a request + response pair)."""
    pages = load_pages()
    titles: dict[str, list[str]] = {}
    for page in pages:
        if page.category != "exact_duplicate":
            titles.setdefault(page.site, []).append(page.title)
    warcinfo_id = record_id("warcinfo " + FILENAME)
    info = (
        "software: ccpretrain dataprep demo-data\r\nformat: WARC File Format 1.1\r\n"
        "conformsTo: https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/\r\n"
        "isPartOf: CCPRETRAIN-DEMO\r\noperator: ccpretrain\r\n"
        "description: Demo crawl; every page is original text written for ccpretrain, nothing was fetched.\r\n"
    )
    out = [
        _record(
            "warcinfo",
            warcinfo_id,
            CRAWL_START,
            {"Content-Type": "application/warc-fields", "WARC-Filename": FILENAME},
            info.encode(),
        )
    ]
    counts: dict[str, int] = {}
    when = CRAWL_START
    responses: dict[str, tuple[str, str, bytes, datetime]] = {}
    for page in pages:
        when += timedelta(seconds=7)
        original = next(p for p in pages if p.url == page.source) if page.category == "exact_duplicate" else page
        related = [t for t in titles.get(original.site, []) if t != original.title][:4]
        content_type, body = _encoded(original, related)
        out += _exchange(page.url, page.lang, content_type, body, when, page.date, warcinfo_id)
        responses[page.url] = (record_id("response " + page.url), content_type, body, when)
        counts[page.category] = counts.get(page.category, 0) + 1
    for url, content_type in BINARY_URLS.items():
        when += timedelta(seconds=7)
        body = _png() if content_type == "image/png" else _pdf()
        out += _exchange(url, "en", content_type, body, when, None, warcinfo_id)
        counts["non_html"] = counts.get("non_html", 0) + 1
    out.append(_revisit(REVISIT_URL, responses[REVISIT_URL], CRAWL_START + timedelta(days=3), warcinfo_id))
    counts["revisit"] = 1
    atomic_write_bytes(path, b"".join(out))
    return counts


def _revisit(url: str, original: tuple[str, str, bytes, datetime], when: datetime, warcinfo_id: str) -> bytes:
    """A revisit record (identical payload): HTTP headers only, pointing at the earlier response."""
    original_id, content_type, body, original_when = original
    headers_only = _http_response(content_type, body, when, None, urlsplit(url).netloc)[: -len(body)]
    return _record(
        "revisit",
        record_id("revisit " + url),
        when,
        {
            "WARC-Warcinfo-ID": warcinfo_id,
            "WARC-Target-URI": url,
            "Content-Type": "application/http; msgtype=response",
            "WARC-Profile": "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest",
            "WARC-Refers-To": original_id,
            "WARC-Refers-To-Target-URI": url,
            "WARC-Refers-To-Date": warc_date(original_when + timedelta(milliseconds=250)),
            "WARC-Payload-Digest": sha1_digest(body),
        },
        headers_only,
    )


REFERENCE_FILENAME = "reference_en.jsonl"


def write_reference(path: str, share: float = 0.5) -> int:
    """A JSONL reference corpus for the perplexity model: the first ``share`` of the good English
    articles (the rest stay unseen, so the demo's perplexities are not all training data)."""
    pages = [p for p in load_pages("good") if p.lang == "en"]
    lines = [
        json.dumps({"id": p.url, "text": p.text}, ensure_ascii=False) for p in pages[: max(1, int(len(pages) * share))]
    ]
    atomic_write_bytes(path, ("\n".join(lines) + "\n").encode("utf-8"))
    return len(lines)
