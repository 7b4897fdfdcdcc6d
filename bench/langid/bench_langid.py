"""Language ID: lid.176 alone against the lid.176 + lingua ensemble (lingua's low- and high-accuracy modes).

Prints exact accuracy over the 75 languages of ../shared/data/langid (lingua's test sentences) and a
per-language table, the English gate (lang == en and lang_score >= 0.65: precision and recall), the
same on text no model was tuned on (the project's own multilingual pages and tests/data pages, plus
real web pages labelled by CLD2 in ../shared/data/html, a weak label), documents per second on web
documents, and lingua's load time and peak memory per worker process (measured in a fresh process).

The gate is reported raw and on a cleaned view of the lingua sentences, which sets aside sentences
whose corpus label is wrong by rules stated here, not by any detector (``label_flags``): a sentence
written mostly in another script than its corpus (Latin letters in the Urdu corpus), HTTP header
fields (crawl debris), and English function words making up much of a sentence in another language's
corpus. The gate's remaining errors on the cleaned view are listed. A third, reviewed view also applies
the hand review in ``bench/langid/langid_gate_review.yaml``: every gate error any of the three configurations
makes on the cleaned view was read, and the English ones relabelled en (names alone set aside).

    python -m bench.langid.bench_langid [--ask-below 0.9] [--ask-chars 0]
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import regex
import yaml

from bench.common.paths import ROOT, SHARED
from dataprep.classify.langid import LanguageID, latin_share, model_labels

REVIEW = Path(__file__).with_name("langid_gate_review.yaml")  # the hand review, beside this script
GATE = 0.65
HTTP_FIELDS = regex.compile(r"Content-Length:|Connection: close|Cache-Control:|Content-Type:")
# English words that are not words of the other Latin-script languages in the set
ENGLISH_ONLY = frozenset(
    "the and with that this which from were have been their they you your its our also about these those "
    "would should could there into".split()
)
ENGLISH_FUNCTION = ENGLISH_ONLY | frozenset("of to in for on by is are at as an or be it was not".split())


def lingua_sentences() -> tuple[list[str], list[str]]:
    rows = [
        json.loads(line)
        for line in (SHARED / "langid" / "lingua-sentences-75langs-300each.jsonl").open(encoding="utf-8")
    ]
    return [r["text"] for r in rows], [r["lang"] for r in rows]


def label_flags(texts: list[str], gold: list[str]) -> list[str | None]:
    """Why a sentence's corpus label is wrong (None: no reason found). ``script``: most of its letters
    are Latin in a corpus written mostly in another script, or the reverse; ``http``: HTTP header
    fields; ``english``: in a non-English corpus, an English-only word and English function words
    making up a fifth or more of its words."""
    latin = defaultdict(list)
    for text, lang in zip(texts, gold):
        latin[lang].append(latin_share(text))
    latin_corpus = {lang: sum(v) / len(v) >= 0.5 for lang, v in latin.items()}
    flags: list[str | None] = []
    for text, lang in zip(texts, gold):
        words = regex.findall(r"\p{L}+", text.lower())
        if (latin_share(text) > 0.5) != latin_corpus[lang]:
            flags.append("script")
        elif HTTP_FIELDS.search(text):
            flags.append("http")
        elif (
            lang != "en"
            and any(w in ENGLISH_ONLY for w in words)
            and sum(w in ENGLISH_FUNCTION for w in words) >= 0.2 * len(words)
        ):
            flags.append("english")
        else:
            flags.append(None)
    return flags


def reviewed_labels(texts: list[str], gold: list[str], flags: list[str | None]) -> tuple[list[str], list[bool]]:
    """The labels and the sentences kept in the reviewed view: the cleaned view with the hand review's
    verdicts applied (``en``: relabelled English; ``none``: set aside)."""
    review = yaml.safe_load(REVIEW.read_text(encoding="utf-8"))
    verdicts = {(r["lang"], r["text"]): r["verdict"] for r in review["changed"]}
    labels = [verdicts.get((g, t), g) for t, g in zip(texts, gold)]
    found = sum((g, t) in verdicts for t, g in zip(texts, gold))
    if found != len(verdicts):
        raise SystemExit(f"the hand review names {len(verdicts) - found} sentences the lingua set does not hold")
    return [g if g != "none" else "und" for g in labels], [f is None and g != "none" for f, g in zip(flags, labels)]


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


def gate(gold: list[str], langs: list, scores: list[float], keep: list[bool]) -> tuple[float, float, list[int]]:
    """English gate precision, recall and the indices of its errors (false admits, then misses) among ``keep``."""
    admitted = [i for i, (p, s) in enumerate(zip(langs, scores)) if keep[i] and p == "en" and s >= GATE]
    correct = sum(gold[i] == "en" for i in admitted)
    en_total = sum(g == "en" and k for g, k in zip(gold, keep))
    taken = set(admitted)
    missed = [i for i, g in enumerate(gold) if keep[i] and g == "en" and i not in taken]
    return (
        correct / max(1, len(admitted)),
        correct / max(1, en_total),
        [i for i in admitted if gold[i] != "en"] + missed,
    )


def evaluate(
    stage: LanguageID,
    texts: list[str],
    gold: list[str],
    flags: list[str | None] | None = None,
    reviewed: tuple | None = None,
) -> dict:
    langs, scores = stage.predict(texts)
    per = defaultdict(lambda: [0, 0])
    for g, p in zip(gold, langs):
        per[g][0] += g == p
        per[g][1] += 1
    admitted = [g for g, p, s in zip(gold, langs, scores) if p == "en" and s >= GATE]
    false_en = dict(sorted(Counter(g for g in admitted if g != "en").items(), key=lambda kv: -kv[1]))
    precision, recall, _ = gate(gold, langs, scores, [True] * len(gold))
    clean = gate(gold, langs, scores, [f is None for f in flags]) if flags else None
    review = gate(reviewed[0], langs, scores, reviewed[1]) if reviewed else None
    return {
        "exact": sum(g == p for g, p in zip(gold, langs)) / len(gold),
        "per": {k: v[0] / v[1] for k, v in per.items()},
        "gate_precision": precision,
        "gate_recall": recall,
        "false_en": false_en,
        "clean": clean,
        "reviewed": review,
        "langs": langs,
        "scores": scores,
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


def lingua_cost(accuracy: str, texts: list[str]) -> tuple[float, float]:
    """Seconds to build lingua and label ``texts`` (windows as the stage sends them) the first time, and
    the process's peak memory in MB (VmHWM: ru_maxrss would count this parent's), in a fresh process (as on each
    worker)."""
    script = (
        "import json, re, sys, time; from dataprep.classify.langid import lingua_detector; texts = "
        "json.load(sys.stdin); "
        "t = time.perf_counter(); lingua_detector(sys.argv[1]).compute_language_confidence_values_in_parallel(texts); "
        "print(time.perf_counter() - t, int(re.search(r'VmHWM:\\s+(\\d+)', "
        "open('/proc/self/status').read())[1]) / 1024)"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, accuracy], input=json.dumps(texts), capture_output=True, text=True, check=True
    )
    seconds, mb = out.stdout.split()
    return float(seconds), float(mb)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ask-below", type=float, default=0.9)
    parser.add_argument("--ask-chars", type=int, default=0)
    parser.add_argument("--ask-labels", default="no,en")
    args = parser.parse_args()
    ask = dict(ask_below=args.ask_below, ask_chars=args.ask_chars, ask_labels=args.ask_labels.split(","))
    stages = {
        "lid.176": LanguageID(second_opinion="none"),
        "+lingua low": LanguageID(second_opinion="lingua", lingua_accuracy="low", **ask),
        "+lingua high": LanguageID(second_opinion="lingua", lingua_accuracy="high", **ask),
    }
    names = list(stages)
    web = web_pages()
    sentences = lingua_sentences()
    sets = {
        "lingua sentences (75 langs)": sentences,
        "own pages + paragraphs (not tuned on)": own_pages(),
        "web pages (CLD2 labels, weak)": web,
    }
    flags = label_flags(*sentences)
    reviewed = reviewed_labels(*sentences, flags)
    print(
        f"cleaned view sets aside {sum(f is not None for f in flags)} lingua sentences: "
        f"{dict(Counter((g, f) for g, f in zip(sentences[1], flags) if f).most_common())}"
    )
    results = {}
    for name, (texts, gold) in sets.items():
        results[name] = {
            k: evaluate(st, texts, gold, *((flags, reviewed) if texts is sentences[0] else ()))
            for k, st in stages.items()
        }
        r = results[name]
        print(f"\n## {name}: {len(texts)} texts")
        print("exact accuracy      " + "   ".join(f"{k} {r[k]['exact']:.3f}" for k in names))
        print(
            "English gate P / R  "
            + "   ".join(f"{k} {r[k]['gate_precision']:.3f} / {r[k]['gate_recall']:.3f}" for k in names)
        )
        if r[names[0]]["clean"]:
            print(
                "  cleaned view P / R "
                + "   ".join(f"{k} {r[k]['clean'][0]:.3f} / {r[k]['clean'][1]:.3f}" for k in names)
            )
            print(
                "  reviewed view P / R "
                + "   ".join(f"{k} {r[k]['reviewed'][0]:.3f} / {r[k]['reviewed'][1]:.3f}" for k in names)
            )
        for k in names:
            print(f"  non-English texts admitted by the gate, by label, {k}: {r[k]['false_en']}")
    texts, gold = sentences
    for k in names[1:]:
        r = results["lingua sentences (75 langs)"][k]
        print(f"\ngate errors left on the cleaned view, {k} (label, prediction, score, text):")
        for i in r["clean"][2]:
            print(f"  {gold[i]} -> {r['langs'][i]} {r['scores'][i]:.2f}  {texts[i][:110]!r}")
        print(f"gate errors left on the reviewed view, {k}:")
        for i in r["reviewed"][2]:
            print(f"  {reviewed[0][i]} -> {r['langs'][i]} {r['scores'][i]:.2f}  {texts[i][:110]!r}")
    r = results["lingua sentences (75 langs)"]
    known = [k for k in r[names[0]]["per"] if k in model_labels(second_opinion="none")]
    print(
        f"\nlingua sentences, languages lid.176 knows ({len(known)}): "
        + "  ".join(f"{k} {sum(r[k]['per'][lang] for lang in known) / len(known):.3f}" for k in names)
    )
    print("\n| lang | " + " | ".join(names) + " |\n|---|" + "---|" * len(names))
    for lang in sorted(r[names[0]]["per"]):
        print(f"| {lang} | " + " | ".join(f"{r[k]['per'][lang]:.2f}" for k in names) + " |")

    windows = [stages[names[2]]._window(" ".join(t.split())) for t in web[0]]
    for accuracy in (
        "low",
        "high",
    ):  # lingua reads texts of 120+ characters by trigrams only, short ones by 1- to 5-grams
        for what, batch in ((f"{len(windows)} web pages", windows), ("750 short sentences", sentences[0][::30])):
            seconds, mb = lingua_cost(accuracy, batch)
            print(
                f"lingua {accuracy} accuracy, fresh process: {seconds:.1f} s to load and label {what}, peak "
                f"memory {mb:.0f} MB"
            )
    rates = throughput(list(stages.values()), web[0])
    print(
        "\nweb documents/s: "
        + ", ".join(f"{k} {rate:.0f} ({rates[0] / rate:.2f}x lid.176's time)" for k, rate in zip(names, rates))
    )
    print(f"counters {dict(stages[names[2]].take_counters())}")


if __name__ == "__main__":
    main()
