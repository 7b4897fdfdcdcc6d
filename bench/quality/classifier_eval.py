"""Does a classifier trained from reference text (DCLM's recipe) keep better pages than the rules at the
same kept share? Judged on the labelled pages of bench.quality.filter_eval, which it never trains on.

    python -m bench.quality.classifier_eval                   # DCLM's hyperparameters
    python -m bench.quality.classifier_eval --small           # the same at small-data sizes (dim 16, 20 epochs)

Reference (positives): the Leipzig sentences of ../shared/data/langid (CC BY 4.0; 75 languages),
dealt into pages of ten sentences of one language. Negatives: pages of a crawl sampled on Spark, as
DCLM samples its crawl: the demo crawl (``dataprep demo-data``, pages written for ccpretrain, none of
them labelled here) extracted by a pipeline run. Neither holds a labelled page.

Figures per split: the rules (``--rules``) alone; the classifier alone keeping the rules' share; the
rules then the classifier's top 50% (the ``dclm`` preset's order, at 50%) against the rules then an
even 50% draw, whose expectation is half the rules' good and bad pages.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import pyarrow as pa

from bench.common.paths import ROOT, SHARED
from bench.quality.filter_eval import SPLITS, load_eval_set, load_preset, rule_hits

PAGE_SENTENCES = 10


def reference_pages(shared: Path) -> list[str]:
    """The Leipzig sentences, ten consecutive sentences of one language to a page."""
    rows = [
        json.loads(line)
        for line in (shared / "langid" / "lingua-sentences-75langs-300each.jsonl").open(encoding="utf-8")
    ]
    by_lang: dict[str, list[str]] = {}
    for row in rows:
        by_lang.setdefault(row["lang"], []).append(row["text"])
    return [
        " ".join(lines[i : i + PAGE_SENTENCES])
        for _, lines in sorted(by_lang.items())
        for i in range(0, len(lines) - PAGE_SENTENCES + 1, PAGE_SENTENCES)
    ]


def crawl_corpus(work: Path, spark) -> str:
    """The demo crawl, extracted by a pipeline run: the corpus the negatives are drawn from."""
    from dataprep.core.config import load_config
    from pipelines.cli import main as dataprep_main
    from pipelines.pipeline_run import run_pipeline

    dataprep_main(["demo-data", "--output", str(work / "crawl")])
    config = load_config(
        {
            "input": {"paths": [str(work / "crawl" / "demo.warc.gz")]},
            "output": {"dir": str(work / "crawl-run")},
            "stages": [{"stage": "extract"}],
        }
    )
    return run_pipeline(config, spark=spark).corpus_dir


def train(work: Path, negatives: str, small: bool, seed: int) -> str:
    from pipelines.cli import main as dataprep_main

    positives = work / "reference.jsonl"
    positives.write_text("".join(json.dumps({"text": t}) + "\n" for t in reference_pages(SHARED)), encoding="utf-8")
    model = work / ("reference-small.bin" if small else "reference-dclm.bin")
    sizes = ["--dim", "16", "--bucket", "20000", "--epoch", "20", "--lr", "0.3", "--min-count", "1"] if small else []
    code = dataprep_main(
        [
            "train-classifier",
            "--positives",
            str(positives),
            "--negatives",
            negatives,
            "--output",
            str(model),
            "--seed",
            str(seed),
            "--threads",
            "1",
            *sizes,
        ]
    )  # one thread: the same model every run
    if code:
        raise SystemExit(f"training failed ({code})")
    return str(model)


def top_share(scores: list[float], keep: float) -> list[bool]:
    """Which pages top_fraction keeps at ``keep`` (the stage itself, exact, in memory)."""
    from dataprep.quality.top_fraction import TopFraction

    table = pa.table({"id": [str(i) for i in range(len(scores))], "text": [""] * len(scores), "score": scores})
    kept = set(TopFraction(score="score", keep=keep).run_local(table).kept.column("id").to_pylist())
    return [str(i) in kept for i in range(len(scores))]


def figures(pages: list[dict], rules_keep: list[bool], scores: list[float]) -> dict:
    good = [p["label"] == "good" for p in pages]

    def count(kept: list[bool]) -> tuple[int, int, int]:
        return sum(kept), sum(k and g for k, g in zip(kept, good)), sum(k and not g for k, g in zip(kept, good))

    n_rules, _, _ = count(rules_keep)
    classifier_same = top_share(scores, n_rules / len(pages)) if n_rules < len(pages) else [True] * len(pages)
    survivors = [i for i, k in enumerate(rules_keep) if k]
    top_half = top_share([scores[i] for i in survivors], 0.5)
    rules_then_top = [False] * len(pages)
    for i, keep in zip(survivors, top_half):
        rules_then_top[i] = keep
    rules_count = count(rules_keep)
    return {
        "pages": len(pages),
        "good": sum(good),
        "bad": len(pages) - sum(good),
        "rules": rules_count,
        "classifier_at_rules_share": count(classifier_same),
        "rules_then_top50": count(rules_then_top),
        "rules_then_even50": (rules_count[0] / 2, rules_count[1] / 2, rules_count[2] / 2),
    }


def markdown(rows: dict[str, dict], rules: str) -> str:
    def cell(kept, good, bad):
        return f"{kept:g} kept: {good:g} good, {bad:g} bad"

    lines = ["| selection | " + " | ".join(rows) + " |", "|---|" + "---|" * len(rows)]
    labels = [
        ("rules", f"{rules} alone"),
        ("classifier_at_rules_share", "classifier alone, top share = the rules' share"),
        ("rules_then_top50", f"{rules}, then classifier top 50%"),
        ("rules_then_even50", f"{rules}, then an even 50% (expected)"),
    ]
    for key, label in labels:
        lines.append(f"| {label} | " + " | ".join(cell(*r[key]) for r in rows.values()) + " |")
    lines.append("| pages (good + bad) | " + " | ".join(f"{r['good']} + {r['bad']}" for r in rows.values()) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", default=str(ROOT / "out" / "bench" / "classifier_eval"))
    parser.add_argument("--rules", default="fineweb_filters", help="the rule preset to compare with (and to run first)")
    parser.add_argument(
        "--small",
        action="store_true",
        help="small-data sizes instead of DCLM's (dim 16, bucket 20k, 20 epochs, lr 0.3)",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from dataprep.classify.fasttext_classifier import FastTextClassifier
    from pipelines.spark import get_spark

    t0, cpu0 = time.perf_counter(), time.process_time()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    spark = get_spark("local[2]", app_name="classifier-eval")
    model = train(work, crawl_corpus(work, spark), args.small, args.seed)
    pages = load_eval_set()
    scores = FastTextClassifier.load(model).score([p["text"] or "" for p in pages], "hq")
    stages = load_preset(args.rules)
    rules_keep = [not rule_hits(stages, p["text"] or "", p["run_lang"]) for p in pages]
    rows = {}
    for split in SPLITS:
        chosen = [i for i, p in enumerate(pages) if split == "all" or p["split"] == split]
        rows[split] = figures([pages[i] for i in chosen], [rules_keep[i] for i in chosen], [scores[i] for i in chosen])
    print(markdown(rows, args.rules))
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        f"\nmodel {model}; wall {time.perf_counter() - t0:.0f} s, CPU "
        f"{time.process_time() - cpu0 + children.ru_utime + children.ru_stime:.0f} s "
        "(this process and its children; the Spark JVM's own CPU is not counted)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
