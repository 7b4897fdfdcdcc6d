"""Build the ingestion benchmark input: the 200 real trafilatura-eval pages as WARC response records
(one gzip member each, as Common Crawl writes them), repeated to get a larger input.

    python -m bench.common.make_bench_warc --repeat 5 --files 2 --out /tmp/ccpretrain-bench/warc

Each copy gets its own URL and record id, and its text blocks start with a copy tag (``c3``): copies of
identical HTML would meet Trafilatura's cross-document duplicate cache, which datatrove turns on
(``deduplicate=True``) and which empties a page seen a few times before; in a real crawl file pages are
distinct. (Without the tags, datatrove's Trafilatura returned nothing for 2,938 of 3,980 CC-shaped pages.)
The tag leads the block so lines still end as they did (the line-punctuation rules read line ends).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
from pathlib import Path

from bench.common.paths import SHARED
from dataprep.readers.warc_writer import record_id, warc_record


def warc_response(url: str, html: bytes, date: str = "2024-05-18T01:58:10Z") -> bytes:
    """One gzip-compressed WARC/1.1 response record holding an HTTP 200 text/html response."""
    http = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n" % len(html) + html
    fields = {
        "WARC-Record-ID": record_id(url),
        "WARC-Date": date,
        "WARC-Target-URI": url,
        "WARC-Identified-Payload-Type": "text/html",  # as Common Crawl; lets datatrove skip libmagic
        "Content-Type": "application/http; msgtype=response",
    }
    return gzip.compress(warc_record("response", fields, http), compresslevel=6)


# Opening tags of the blocks that hold a page's text: each gets the copy tag after it.
_BLOCK_START = re.compile(rb"(?i)(<(?:p|li|td|th|dd|h[1-6]|blockquote|pre|div)(?:\s[^>]*)?>)")


def tag_copy(html: bytes, copy: int) -> bytes:
    """The page with ``c<copy> `` at the start of each text block, so copies are not identical texts."""
    return _BLOCK_START.sub(b"\\1c%d " % copy, html)


def load_pages(shared: Path = SHARED) -> list[tuple[str, bytes]]:
    root = shared / "html" / "trafilatura-eval"
    pages = []
    for line in (root / "gold.jsonl").open():
        page = json.loads(line)
        url = page["url"].strip().replace(" ", "%20")
        url = url if url.startswith("http") else f"http://eval.example/{page['file']}"
        pages.append((url, gzip.open(root / page["file"]).read()))
    return pages


def write_bench_warcs(out_dir: str, repeat: int = 5, files: int = 1) -> list[str]:
    """Write ``files`` WARC files holding ``repeat`` copies of every page in total; return their paths."""
    pages = load_pages()
    os.makedirs(out_dir, exist_ok=True)
    paths = [os.path.join(out_dir, f"bench-{i:03d}.warc.gz") for i in range(files)]
    handles = [open(p + ".tmp", "wb") for p in paths]
    n = 0
    for copy in range(repeat):
        for url, html in pages:
            sep = "&" if "?" in url else "?"
            handles[n % files].write(warc_response(f"{url}{sep}copy={copy}", tag_copy(html, copy)))
            n += 1
    for handle, path in zip(handles, paths):
        handle.close()
        os.replace(path + ".tmp", path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--files", type=int, default=1)
    parser.add_argument("--out", default="/tmp/ccpretrain-bench/warc")
    args = parser.parse_args()
    paths = write_bench_warcs(args.out, args.repeat, args.files)
    print("\n".join(paths))


if __name__ == "__main__":
    main()
