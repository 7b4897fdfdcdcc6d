"""Content safety on labelled pages: precision and recall of safety.yaml's stages.

Harmful pages: tests/data/safety_pages.yaml (Chinese, Japanese, Russian: adult fiction, gambling
scams, contact spam, stuffed titles; written for this project) and tests/data/safety_labelled.jsonl
(every shipped language: explicit fiction under a site banner and explicit listings, against medical,
sex-education, court-news and forum pages as hard negatives; written for this project, since
../shared/data holds no explicit page). For the second set the table gives, per language, pages
dropped and which rule of the adult signal decides (whole-page density, the densest window alone, distinct
explicit entries), then the calibration view: the highest benign and the lowest explicit adult score
per language (the density over its threshold or the distinct entries over their minimum: 1 drops). Benign text, never
tuned on: the project's own multilingual demo pages, the 200 real web pages of ../shared/data/html (news, blogs, company
pages; mostly German and English), the shared Common Crawl documents, and pseudo-pages of 20 lingua sentences for each
of 75 languages (real web sentences). A page counts as flagged when any safety stage drops it; the table shows which
stage and reason.

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


def labelled_pages() -> list[dict]:
    """tests/data/safety_labelled.jsonl: one page per line with lang, label (explicit/benign), kind, source."""
    path = ROOT / "tests" / "data" / "safety_labelled.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def adult_rules(pages: list[dict]) -> list[dict]:
    """Per page, the adult signals of safety.yaml's harmful_content and the rules they pass."""
    from dataprep.safety.harmful import ALL, load_category_lists, vocabulary_signals
    from dataprep.safety.word_lists import lang_key, prepare, tokens_of

    stage = next(s for s in _safety_stages() if type(s).__name__ == "HarmfulContent")
    lists = load_category_lists(True, ())["adult"]
    out = []
    for p in pages:
        lang = lang_key(p.get("lang"))
        tiers = lists.get(lang or ALL)
        prepared = prepare(p["text"])
        tokens = tokens_of(prepared)
        page, distinct = vocabulary_signals(tiers, prepared, tokens, 10**12, stage.ambiguous_weight)
        density, _ = vocabulary_signals(tiers, prepared, tokens, stage.window_tokens, stage.ambiguous_weight)
        threshold, min_terms = stage.page_threshold("adult", lang, distinct), stage.min_distinct_terms.get("adult")
        rules = [
            name
            for name, hit in (
                ("page density", page >= threshold),
                ("window only", density >= threshold > page),
                ("distinct entries", min_terms and distinct >= min_terms),
            )
            if hit
        ]
        score = max(density / threshold, distinct / min_terms if min_terms else 0.0)
        out.append({"score": score, "rules": rules})
    return out


def report_labelled(pages: list[dict], reasons: list[str | None]) -> tuple[int, int]:
    """Print per-language and per-rule figures of the labelled set; return (explicit missed, benign dropped)."""
    rules = adult_rules(pages)
    langs = sorted({p["lang"] for p in pages}, key=[p["lang"] for p in pages].index)
    print(f"labelled pages ({len(pages)}, tests/data/safety_labelled.jsonl): dropped by a safety stage, per language")
    print(
        f"  {'lang':<5}{'explicit':>10}{'benign':>9}   explicit pages by adult rule (a page may pass "
        "several)          highest benign / lowest explicit adult score (1: dropped)"
    )
    missed = lost = 0
    for lang in langs:
        idx = [i for i, p in enumerate(pages) if p["lang"] == lang]
        exp = [i for i in idx if pages[i]["label"] == "explicit"]
        ben = [i for i in idx if pages[i]["label"] == "benign"]
        caught = sum(1 for i in exp if reasons[i])
        dropped = sum(1 for i in ben if reasons[i])
        missed += len(exp) - caught
        lost += dropped
        by_rule = Counter(r for i in exp for r in rules[i]["rules"])
        top_benign = max(rules[i]["score"] for i in ben)
        low_explicit = min(rules[i]["score"] for i in exp)
        print(
            f"  {lang:<5}{caught:>6}/{len(exp):<3}{dropped:>5}/{len(ben):<3}   {dict(by_rule)!s:<62} "
            f"{top_benign:.2f} / {low_explicit:.2f}"
        )
    for p, r in zip(pages, reasons):
        if bool(r) != (p["label"] == "explicit"):
            print(f"    wrong: {p['id']} ({p['label']}) got {r}")
    return missed, lost


def benign() -> dict[str, list[dict]]:
    from resiliparse.extract.html2text import extract_plain_text

    sets: dict[str, list[dict]] = {"demo pages": [], "web pages": [], "cc documents": [], "lingua pseudo-pages": []}
    for name in ("good_multilingual.yaml", "good_en.yaml"):
        for p in yaml.safe_load((ROOT / "dataprep" / "assets" / "demo" / name).read_text(encoding="utf-8")):
            sets["demo pages"].append(
                {"url": p["url"], "title": p.get("title"), "text": p["text"], "lang": p.get("lang", "en")}
            )
    folder = SHARED / "html" / "trafilatura-eval"
    for line in (folder / "gold.jsonl").open(encoding="utf-8"):
        row = json.loads(line)
        text = extract_plain_text(
            gzip.decompress((folder / row["file"]).read_bytes()).decode("utf-8", "replace"), main_content=True
        )
        if text.strip():
            sets["web pages"].append(
                {"url": row["url"], "title": row.get("title"), "text": text, "lang": row.get("lang_detected")}
            )
    for path in sorted((SHARED / "documents").glob("*")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                sets["cc documents"].append(
                    {"url": str(row.get("id", "")), "title": None, "text": row["text"], "lang": "en"}
                )
    by_lang: dict[str, list[str]] = {}
    for line in (SHARED / "langid" / "lingua-sentences-75langs-300each.jsonl").open(encoding="utf-8"):
        row = json.loads(line)
        by_lang.setdefault(row["lang"], []).append(row["text"])
    for lang, texts in sorted(by_lang.items()):
        for i in range(0, 300, 20):
            sets["lingua pseudo-pages"].append(
                {"url": "", "title": None, "text": "\n".join(texts[i : i + 20]), "lang": lang}
            )
    return sets


def _safety_stages():
    from dataprep.core.config import parse_stages

    return parse_stages([{"include": "safety.yaml"}], str(ROOT / "configs" / "pipeline"))


def run(pages: list[dict]) -> list[str | None]:
    from dataprep.core.runner import run_stages

    stages = _safety_stages()
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
    print(
        f"  recall {len(caught) / len(harmful):.2f} (by the intended stage and reason: "
        f"{len(right) / len(harmful):.2f}); prose dropped: {false_pos}"
    )
    for p, r in zip(pages, reasons):
        print(f"    {p['id']:<34} expected {str(p['harmful']):<24} got {r}")
    pages2 = labelled_pages()
    missed, lost = report_labelled(pages2, run(pages2))
    flagged_total = lost
    benign_total = sum(1 for p in pages2 if p["label"] == "benign")
    for name, items in benign().items():
        got = run(items)
        flagged = Counter(r for r in got if r)
        flagged_total += sum(flagged.values())
        benign_total += len(items)
        print(
            f"benign {name}: {len(items)} pages, dropped {sum(flagged.values())} "
            f"({sum(flagged.values()) / len(items):.1%}): {dict(flagged)}"
        )
    n_explicit = sum(1 for p in pages2 if p["label"] == "explicit")
    caught_total = len(caught) + n_explicit - missed
    print(f"explicit pages of the labelled set missed: {missed} of {n_explicit}")
    print(
        "precision on labelled harmful vs all benign pages: "
        f"{caught_total / (caught_total + flagged_total + len(false_pos)):.3f}"
        f" (benign pages dropped: {flagged_total} of {benign_total}); {time.perf_counter() - t0:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
