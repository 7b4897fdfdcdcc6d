"""HTML extraction variants: quality on trafilatura's annotated pages and pages/s, in one process.

    python -m bench.extraction.bench_extract [--rounds 3] [--json PATH]

Quality: share of `with` snippets found and of `without` snippets (boilerplate) absent, on the even
pages (where the block rules' thresholds were chosen), the odd pages (held out from those; the class-name
list of boilerplate.drop_marked_elements was chosen on all 200) and all 200.
Speed: each variant extracts the 200 decoded pages once per round, rounds interleaved, median taken;
compare the ratios against Trafilatura printed in the same run, not absolute figures across runs.
Sanity checks without gold: text kept on the real WARC pages relative to Trafilatura, and the share of
main-text sentences kept on a synthetic article page (nav, related links, footer) per language.
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import time
from pathlib import Path

from bench.common.paths import SHARED
from dataprep.core.config import InputConfig
from dataprep.core.stage import concat
from dataprep.html.charset import decode_html
from dataprep.html.extract import Extract
from dataprep.readers import iter_documents
from tests.support.snippets import snippet_scores

WARCS = (
    "wget/dolma-sample-0000.warc.gz",
    "wget/IAH-urls-wget.warc.gz",
    "cc-main-2024-22-whirlwind/whirlwind.warc.gz",
    "cc-main-2014-35-head/CC-MAIN-20140820021334-00006-ip-10-180-136-8.ec2.internal.warc",
)
LANGS = ("de", "ru", "zh", "ja", "ar", "hi", "es", "fi")


def variants() -> dict:
    import trafilatura

    def trafilatura_fast(html: str) -> str:
        return (trafilatura.extract(html, favor_precision=True, include_tables=True, fast=True) or "").strip()

    return {
        "resiliparse": Extract(engine="resiliparse").extract,
        "blocks": Extract(engine="blocks").extract,
        "auto": Extract(engine="auto").extract,
        "auto_unmarked": Extract(engine="auto", drop_marked=False).extract,  # without the class-name pass
        "auto_fast": Extract(
            engine="auto", trafilatura_fast=True
        ).extract,  # routed pages: Trafilatura without fallbacks
        "trafilatura": Extract(engine="trafilatura").extract,
        "trafilatura_fast": trafilatura_fast,
    }


def article_page(lang: str, sentences: list[str]) -> tuple[str, list[str]]:
    """A news-like page: navigation, 4 paragraphs of 3 sentences, a related-links list, a footer."""
    paragraphs = [" ".join(sentences[i : i + 3]) for i in range(0, 12, 3)]
    links = "".join(f'<li><a href="/a{i}">{s[:60]}</a></li>' for i, s in enumerate(sentences[12:18]))
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    page = (
        f'<html lang="{lang}"><head><title>{sentences[0][:50]}</title></head><body>'
        f"<nav><ul>{links}</ul></nav><article><h1>{sentences[0][:50]}</h1>{body}</article>"
        f"<aside><h3>{sentences[18][:30]}</h3><ul>{links}</ul></aside><footer>© 2024 "
        f"{sentences[19][:40]}</footer></body></html>"
    )
    return page, sentences[:12]


def multilingual_pages() -> dict[str, tuple[str, list[str]]]:
    by_lang: dict[str, list[str]] = {}
    for line in (SHARED / "langid/lingua-sentences-75langs-300each.jsonl").open():
        row = json.loads(line)
        if row["lang"] in LANGS:
            by_lang.setdefault(row["lang"], []).append(row["text"].strip())
    return {lang: article_page(lang, by_lang[lang][:20]) for lang in LANGS}


def warc_pages() -> list[str]:
    pages = []
    for name in WARCS:
        batch = concat(r.kept for r in iter_documents(str(SHARED / "warc" / name), InputConfig()))
        if "html" in batch.column_names:
            pages += [
                decode_html(h, c)
                for h, c in zip(batch.column("html").to_pylist(), batch.column("charset").to_pylist())
                if h
            ]
    return pages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="write the figures here for the combined benchmark")
    args = parser.parse_args()

    root = SHARED / "html" / "trafilatura-eval"
    gold = [json.loads(line) for line in (root / "gold.jsonl").open()]
    pages = [decode_html(gzip.open(root / page["file"]).read(), None) for page in gold]
    funcs = variants()
    for f in funcs.values():
        f(pages[0])  # imports and lazy set-up outside the timing
    seconds: dict[str, list[float]] = {name: [] for name in funcs}
    outputs: dict[str, list[str]] = {}
    for _ in range(args.rounds):
        for name, f in funcs.items():
            t0 = time.perf_counter()
            outputs[name] = [f(p) for p in pages]
            seconds[name].append(time.perf_counter() - t0)

    halves = {"even": range(0, len(gold), 2), "odd": range(1, len(gold), 2), "all": range(len(gold))}
    quality = {
        name: {half: snippet_scores([texts[i] for i in idx], [gold[i] for i in idx]) for half, idx in halves.items()}
        for name, texts in outputs.items()
    }
    speed = {name: len(pages) / statistics.median(s) for name, s in seconds.items()}
    warc = warc_pages()
    warc_chars = {name: sum(len(f(p)) for p in warc) for name, f in funcs.items()}
    multi = {
        name: {
            lang: sum(" ".join(s.split()) in " ".join(f(page).split()) for s in main) / len(main)
            for lang, (page, main) in multilingual_pages().items()
        }
        for name, f in funcs.items()
    }

    base = speed["trafilatura"]
    print(
        f"{len(pages)} annotated pages, {args.rounds} interleaved rounds; with = `with` snippets found, "
        "without = boilerplate absent"
    )
    print(
        f"{'variant':<18}{'with even':>10}{'odd':>7}{'all':>7}{'without even':>14}{'odd':>7}{'all':>7}"
        f"{'ms/page':>9}{'pages/s':>9}{'x traf':>8}"
        f"{'warc text':>11}{'multiling':>11}"
    )
    for name in funcs:
        q = quality[name]
        print(
            f"{name:<18}{q['even']['with_found']:>10.3f}{q['odd']['with_found']:>7.3f}{q['all']['with_found']:>7.3f}"
            f"{q['even']['without_absent']:>14.3f}{q['odd']['without_absent']:>7.3f}{q['all']['without_absent']:>7.3f}"
            f"{1000 / speed[name]:>9.2f}{speed[name]:>9.1f}{speed[name] / base:>7.2f}x"
            f"{warc_chars[name] / max(warc_chars['trafilatura'], 1):>10.2f}x{min(multi[name].values()):>11.2f}"
        )
    print(
        f"warc text: characters kept on {len(warc)} real WARC HTML pages relative to trafilatura; "
        f"multiling: worst share of main sentences kept over {', '.join(LANGS)} article pages"
    )
    for name in funcs:
        print(f"  {name:<18}" + " ".join(f"{lang}={v:.2f}" for lang, v in multi[name].items()))
    default = Extract().engine
    if args.json:
        result = {
            "variants": {
                name: {
                    "quality": quality[name],
                    "pages_per_s": speed[name],
                    "speed_ratio_vs_trafilatura": speed[name] / base,
                    "warc_chars_vs_trafilatura": warc_chars[name] / max(warc_chars["trafilatura"], 1),
                    "multilingual_kept": multi[name],
                }
                for name in funcs
            },
            "default": default,
            "quality": quality[default]["all"],
            "trafilatura_quality": quality["trafilatura"]["all"],
            "speed_ratio_vs_trafilatura": speed[default] / base,
        }
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
