"""Language ID: lid.176 alone (today's default) against the lid.176 + lingua ensemble.

Prints exact accuracy over the 75 languages of ../shared/data/langid (lingua's test sentences) and a
per-language table, the English gate (lang == en and lang_score >= 0.65: precision and recall), the
same on text no model was tuned on (the project's own multilingual pages and tests/data pages, plus
real web pages labelled by CLD2 in ../shared/data/html, a weak label), and documents per second on
web documents (lingua's model loading is timed apart: once per worker).

    python bench/bench_langid.py [--ask-below 0.9] [--ask-chars 0]
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from collections import Counter, defaultdict
from pathlib import Path

import yaml

from dataprep.langid import LanguageID, lingua_detector, model_labels

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
GATE = 0.65


def lingua_sentences() -> tuple[list[str], list[str]]:
    rows = [json.loads(line) for line in (SHARED / "langid" / "lingua-sentences-75langs-300each.jsonl").open(encoding="utf-8")]
    return [r["text"] for r in rows], [r["lang"] for r in rows]


def own_pages() -> tuple[list[str], list[str]]:
    """Pages written for this project (never seen by either model's training): whole pages and
    their single paragraphs, which are short like the lingua sentences."""
    texts, gold = [], []
    pages = []
    for name in ("good_multilingual.yaml", "good_en.yaml"):
        pages += yaml.safe_load((ROOT / "dataprep" / "assets" / "demo" / name).read_text(encoding="utf-8"))
    pages += [p for p in yaml.safe_load((ROOT / "tests" / "data" / "safety_pages.yaml").read_text(encoding="utf-8"))]
    for page in pages:
        lang = page.get("lang", "en")
        paragraphs = [p.strip() for p in page["text"].split("\n") if len(p.strip()) > 20]
        texts += [page["text"], *paragraphs]
        gold += [lang] * (1 + len(paragraphs))
    return texts, gold


def web_pages() -> tuple[list[str], list[str]]:
    from resiliparse.extract.html2text import extract_plain_text

    texts, gold = [], []
    folder = SHARED / "html" / "trafilatura-eval"
    for line in (folder / "gold.jsonl").open(encoding="utf-8"):
        row = json.loads(line)
        html = gzip.decompress((folder / row["file"]).read_bytes()).decode("utf-8", "replace")
        text = extract_plain_text(html, main_content=True)
        if text.strip():
            texts.append(text)
            gold.append(row.get("lang_detected") or "und")
    for path in sorted((SHARED / "documents").glob("*")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                texts.append(json.loads(line)["text"])
                gold.append("en")
    return texts, gold


def evaluate(stage: LanguageID, texts: list[str], gold: list[str]) -> dict:
    langs, scores = stage.predict(texts)
    per = defaultdict(lambda: [0, 0])
    for g, p in zip(gold, langs):
        per[g][0] += g == p
        per[g][1] += 1
    admitted = [g for g, p, s in zip(gold, langs, scores) if p == "en" and s >= GATE]
    false_en = dict(sorted(Counter(g for g in admitted if g != "en").items(), key=lambda kv: -kv[1]))
    en_total = sum(g == "en" for g in gold)
    return {
        "exact": sum(g == p for g, p in zip(gold, langs)) / len(gold),
        "per": {k: v[0] / v[1] for k, v in per.items()},
        "gate_precision": sum(g == "en" for g in admitted) / max(1, len(admitted)),
        "gate_recall": sum(g == "en" for g in admitted) / max(1, en_total),
        "false_en": false_en,
    }


def throughput(stages: list[LanguageID], texts: list[str], repeat: int = 5) -> list[float]:
    """Documents per second of each stage, in batches of 100; runs alternate and the best counts
    (the machine is shared)."""
    best = [float("inf")] * len(stages)
    for _ in range(repeat):
        for k, stage in enumerate(stages):
            t0 = time.perf_counter()
            for i in range(0, len(texts), 100):
                stage.predict(texts[i : i + 100])
            best[k] = min(best[k], time.perf_counter() - t0)
    return [len(texts) / b for b in best]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ask-below", type=float, default=0.9)
    parser.add_argument("--ask-chars", type=int, default=0)
    parser.add_argument("--ask-labels", default="no,en")
    args = parser.parse_args()
    old = LanguageID()
    new = LanguageID(second_opinion="lingua", ask_below=args.ask_below, ask_chars=args.ask_chars, ask_labels=args.ask_labels.split(","))
    t0 = time.perf_counter()
    new.predict(["warm up lingua's models"] + ["x"])
    lingua_detector().compute_language_confidence_values("Dette er en setning på norsk.")
    print(f"lingua models loaded in {time.perf_counter() - t0:.1f} s (once per worker process)")

    sets = {"lingua sentences (75 langs)": lingua_sentences(), "own pages + paragraphs (not tuned on)": own_pages()}
    web = web_pages()
    sets["web pages (CLD2 labels, weak)"] = web
    results = {}
    for name, (texts, gold) in sets.items():
        results[name] = (evaluate(old, texts, gold), evaluate(new, texts, gold))
        o, n = results[name]
        print(f"\n## {name}: {len(texts)} texts")
        print(f"exact accuracy      lid.176 {o['exact']:.3f}   ensemble {n['exact']:.3f}")
        print(f"English gate P / R  lid.176 {o['gate_precision']:.3f} / {o['gate_recall']:.3f}   ensemble {n['gate_precision']:.3f} / {n['gate_recall']:.3f}")
        print(f"  non-English texts admitted by the gate, by label: lid.176 {o['false_en']}  ensemble {n['false_en']}")
    o, n = results["lingua sentences (75 langs)"]
    labels = model_labels()
    known = [k for k in o["per"] if k in labels]
    print(f"\nlingua sentences, languages lid.176 knows ({len(known)}): lid.176 {sum(o['per'][k] for k in known) / len(known):.3f}  ensemble {sum(n['per'][k] for k in known) / len(known):.3f}")
    print("\n| lang | lid.176 | ensemble |\n|---|---|---|")
    for lang in sorted(o["per"]):
        print(f"| {lang} | {o['per'][lang]:.2f} | {n['per'][lang]:.2f} |")

    texts = web[0]
    new.take_counters()
    old_rate, new_rate = throughput([old, new], texts)
    asked = new.take_counters()
    print(f"\nweb documents/s: lid.176 {old_rate:.0f}, ensemble {new_rate:.0f} ({old_rate / new_rate:.2f}x slower); counters {dict(asked)}")


if __name__ == "__main__":
    main()
