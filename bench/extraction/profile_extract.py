"""Where the cleaning stages spend CPU per page, in one process (no Spark): each part of extraction,
language ID and the FineWeb filters, on the pages the throughput bench reads.

    python -m bench.extraction.profile_extract [--repeats 3] [--save PATH | --check PATH]

Pages: the 200 trafilatura-eval pages (the throughput bench's input, make_bench_warc.py) and the HTML
pages of the real WARC samples. Each part is timed by CPU time (time.process_time) per page, summed over
the pages; the best of ``--repeats`` passes is printed. ``--save`` writes the extracted texts' sha1s and
``--check`` compares against such a file, so a speed change can show it left every output identical.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
from resiliparse.parse.html import HTMLTree

from bench.common.make_bench_warc import load_pages
from bench.common.paths import ROOT
from bench.extraction.bench_extract import warc_pages
from dataprep.classify.langid import LanguageID
from dataprep.core.config import load_config
from dataprep.html import boilerplate, extract
from dataprep.html.charset import decode_html
from dataprep.html.extract import Extract


def timed(parts: dict, name: str, fn, *args):
    t0 = time.process_time()
    out = fn(*args)
    parts[name] += time.process_time() - t0
    return out


def extract_parts(stage: Extract, html: str, parts: dict) -> str:
    """Extract.extract (engine auto) step by step, each step timed; returns the same text."""
    if not stage.ruby_readings and timed(parts, "ruby readings", extract._RUBY_START.search, html):
        html = timed(parts, "ruby readings", extract._RUBY_READING.sub, "", html)

    def blocks_of(drop_marked: bool):
        tree = timed(parts, "parse", HTMLTree.parse, html)
        too_deep = timed(parts, "too-deep check", extract._too_deep, tree)
        dropped = 0
        if drop_marked and not too_deep:
            names = timed(parts, "marked names (regex)", boilerplate.marked_names, html)
            dropped = timed(parts, "drop_marked_elements", boilerplate.drop_marked_elements, tree, names)
        minimal = timed(parts, "html2text", stage._resiliparse, tree, too_deep, "minimal_html", True)
        blocks = timed(parts, "blocks", boilerplate.parse_blocks, minimal)
        return blocks, timed(parts, "blocks", boilerplate.main_blocks, blocks), dropped

    blocks, keep, dropped = blocks_of(stage.drop_marked)
    if dropped and not any(keep):
        blocks, keep, _ = blocks_of(False)
    text = timed(parts, "blocks", boilerplate.render, blocks, keep)
    if boilerplate.kept_share(blocks, keep) < stage.route_below and len(html) <= stage.route_max_chars:
        parts["routed pages"] += 1
        text = timed(parts, "trafilatura (routed)", stage._trafilatura, html) or text
    return text


def profile(raw: list[tuple[bytes, str | None]], repeats: int) -> tuple[dict, list[str]]:
    stage = Extract()
    langid = LanguageID(languages=["en"], threshold=0.65)  # as the throughput bench: lingua where installed
    fasttext_only = LanguageID(languages=["en"], threshold=0.65, second_opinion="none")
    filters = load_config(
        {
            "input": {"paths": []},
            "output": {"dir": "/tmp/unused"},
            "stages": [{"include": str(ROOT / "configs" / "pipeline" / "fineweb_filters.yaml")}],
        }
    ).stages
    best: dict[str, float] = {}
    for _ in range(repeats):
        parts: dict[str, float] = defaultdict(float)
        htmls = [timed(parts, "decode", decode_html, h, c) for h, c in raw]
        texts = [extract_parts(stage, h, parts) for h in htmls]
        timed(parts, "langid: fastText", fasttext_only.predict, texts)
        t0 = time.process_time()
        langid.predict(texts)  # fastText, then lingua on the texts it asks
        parts["langid: lingua"] += time.process_time() - t0 - parts["langid: fastText"]
        batch = pa.table({"id": [str(i) for i in range(len(texts))], "text": texts, "lang": ["en"] * len(texts)})
        for f in filters:
            batch = timed(parts, f"filter {f.name}", lambda b, f=f: f.apply(b).kept, batch)
        for name, seconds in parts.items():
            best[name] = min(best.get(name, seconds), seconds)
    return best, texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--save", help="write the sha1 of every extracted text here")
    parser.add_argument("--check", help="compare the extracted texts with the sha1s in this file")
    args = parser.parse_args()
    raw = [(html, None) for _, html in load_pages()] + [(p.encode(), "utf-8") for p in warc_pages()]
    Extract().extract("<html><body><p>warm up</p></body></html>")
    best, texts = profile(raw, args.repeats)
    n = len(raw)
    routed = best.pop("routed pages", 0)
    total = sum(best.values())
    print(
        f"{n} pages, best of {args.repeats}; CPU ms per page (all pages), share of the total; {routed:.0f} "
        "pages routed to Trafilatura"
    )
    for name, seconds in sorted(best.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<28}{1000 * seconds / n:8.3f} ms {seconds / total:7.1%}")
    print(f"  {'total':<28}{1000 * total / n:8.3f} ms")
    digests = [hashlib.sha1(t.encode()).hexdigest() for t in texts]
    if args.save:
        Path(args.save).write_text(json.dumps(digests))
    if args.check:
        expected = json.loads(Path(args.check).read_text())
        differ = [i for i, (a, b) in enumerate(zip(expected, digests)) if a != b]
        print(
            f"extracted texts: {len(differ)} of {n} differ from {args.check}"
            + (f" (pages {differ[:10]})" if differ else "")
        )
        if differ or len(expected) != n:
            sys.exit(1)


if __name__ == "__main__":
    main()
