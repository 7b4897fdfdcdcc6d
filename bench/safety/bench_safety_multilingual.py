"""Content safety on labelled pages: precision and recall of safety.yaml's stages.

Harmful pages: tests/data/safety_pages.yaml (Chinese, Japanese, Russian: adult fiction, gambling
scams, contact spam, stuffed titles; written for this project). Benign text, never tuned on: the
project's own multilingual demo pages, the 200 real web pages of ../shared/data/html (news, blogs,
company pages; mostly German and English), the shared Common Crawl documents, and pseudo-pages of 20
lingua sentences for each of 75 languages (real web sentences). A page counts as flagged when any
safety stage drops it; the table shows which stage and reason.

    python -m bench.safety.bench_safety_multilingual
"""

from __future__ import annotations

import gzip
import json
import sys
import time
from collections import Counter

import pyarrow as pa
import yaml

from bench.common.paths import ROOT, SHARED


def labelled() -> list[dict]:
    return yaml.safe_load((ROOT / "tests" / "data" / "safety_pages.yaml").read_text(encoding="utf-8"))


def benign() -> dict[str, list[dict]]:
    from resiliparse.extract.html2text import extract_plain_text

    sets: dict[str, list[dict]] = {"demo pages": [], "web pages": [], "cc documents": [], "lingua pseudo-pages": []}
    for name in ("good_multilingual.yaml", "good_en.yaml"):
        for p in yaml.safe_load((ROOT / "dataprep" / "assets" / "demo" / name).read_text(encoding="utf-8")):
            sets["demo pages"].append({"url": p["url"], "title": p.get("title"), "text": p["text"], "lang": p.get("lang", "en")})
    folder = SHARED / "html" / "trafilatura-eval"
    for line in (folder / "gold.jsonl").open(encoding="utf-8"):
        row = json.loads(line)
        text = extract_plain_text(gzip.decompress((folder / row["file"]).read_bytes()).decode("utf-8", "replace"), main_content=True)
        if text.strip():
            sets["web pages"].append({"url": row["url"], "title": row.get("title"), "text": text, "lang": row.get("lang_detected")})
    for path in sorted((SHARED / "documents").glob("*")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                sets["cc documents"].append({"url": str(row.get("id", "")), "title": None, "text": row["text"], "lang": "en"})
    by_lang: dict[str, list[str]] = {}
    for line in (SHARED / "langid" / "lingua-sentences-75langs-300each.jsonl").open(encoding="utf-8"):
        row = json.loads(line)
        by_lang.setdefault(row["lang"], []).append(row["text"])
    for lang, texts in sorted(by_lang.items()):
        for i in range(0, 300, 20):
            sets["lingua pseudo-pages"].append({"url": "", "title": None, "text": "\n".join(texts[i : i + 20]), "lang": lang})
    return sets


def run(pages: list[dict]) -> list[str | None]:
    from dataprep.core.config import parse_stages
    from dataprep.core.runner import run_stages

    stages = parse_stages([{"include": "safety.yaml"}], str(ROOT / "configs" / "pipeline"))
    table = pa.table({
        "id": [str(i) for i in range(len(pages))],
        "url": [p["url"] for p in pages],
        "title": [p.get("title") for p in pages],
        "text": [p["text"] for p in pages],
        "lang": [p.get("lang") for p in pages],
    })  # fmt: skip
    result, _ = run_stages(stages, table)
    reasons: list[str | None] = [None] * len(pages)
    if not result.dropped.num_rows:
        return reasons
    for i, r in zip(result.dropped.column("id").to_pylist(), result.dropped.column("drop_reason").to_pylist()):
        reasons[int(i)] = r
    return reasons


def main() -> int:
    pages = labelled()
    t0 = time.perf_counter()
    reasons = run(pages)
    harmful = [p for p in pages if p["harmful"]]
    caught = [p for p, r in zip(pages, reasons) if p["harmful"] and r]
    right = [p for p, r in zip(pages, reasons) if p["harmful"] and r == p["harmful"]]
    false_pos = [p["id"] for p, r in zip(pages, reasons) if not p["harmful"] and r]
    print(f"labelled pages: {len(pages)} ({len(harmful)} harmful)")
    print(f"  recall {len(caught) / len(harmful):.2f} (by the intended stage and reason: {len(right) / len(harmful):.2f}); prose dropped: {false_pos}")
    for p, r in zip(pages, reasons):
        print(f"    {p['id']:<34} expected {str(p['harmful']):<24} got {r}")
    flagged_total = 0
    benign_total = 0
    for name, items in benign().items():
        got = run(items)
        flagged = Counter(r for r in got if r)
        flagged_total += sum(flagged.values())
        benign_total += len(items)
        print(f"benign {name}: {len(items)} pages, dropped {sum(flagged.values())} ({sum(flagged.values()) / len(items):.1%}): {dict(flagged)}")
    print(f"precision on labelled harmful vs all benign pages: {len(caught) / (len(caught) + flagged_total + len(false_pos)):.3f}"
          f" (benign pages dropped: {flagged_total} of {benign_total}); {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
