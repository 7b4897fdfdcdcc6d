"""Quality of MinHash dedup on a corpus with planted near-duplicates of known Jaccard.

Base documents are real text: the CC documents in ../shared/data/documents and, per language, blocks
of 60 sentences from ../shared/data/langid (75 languages, CJK included). Each base gets 0-4 variants
made by random word (or, for unspaced scripts, character) substitutions, deletions and insertions at
a random rate, so their Jaccard to the base spreads over ~0.3-1.0. The true Jaccard of every pair
that shares a shingle is computed exactly (brute force over an inverted index; pairs sharing no
shingle have Jaccard 0), over the same shingles the stage uses.

Reported: recall = share of pairs with true J >= 0.8 that end up in the same cluster; precision =
share of removed documents that have a true J >= 0.8 partner in their cluster (so removing them
loses no unique text), and the stricter share whose J to the document kept for them is >= 0.8;
for every removed document, its best true J to another member of its cluster: the minimum over
removed documents ("min J") and how many are below 0.5 ("J<0.5": removals with no real near copy).

    python -m bench.dedup.dedup_eval                 # Spark (local[2]), verification on and off
    python -m bench.dedup.dedup_eval --engine local  # in-memory run_local, same algorithm
    python -m bench.dedup.dedup_eval --json /tmp/dedup_eval.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import xxhash

from bench.common.paths import SHARED
from dataprep.core.stage import DOC_SCHEMA
from dataprep.dedup.minhash import MinHashDedup
from dataprep.dedup.normalize import normalize, shingles
from tests.support.near_duplicates import base_documents, mutate


def build_corpus(seed: int = 0, data: Path = SHARED) -> dict[str, str]:
    rng = random.Random(seed)
    bases = base_documents(data)
    vocab = sorted({w for t in bases[:50] for w in t.split()})
    docs = {}
    for i, base in enumerate(bases):
        docs[xxhash.xxh64_hexdigest(f"{seed}-{i}-0".encode())] = base
        for v in range(rng.randint(0, 4)):
            rate = rng.choice([0.0, 0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08])
            docs[xxhash.xxh64_hexdigest(f"{seed}-{i}-{v + 1}".encode())] = mutate(base, rate, rng, vocab)
    return docs


def shingle_sets(docs: dict[str, str]) -> dict[str, set[bytes]]:
    """The reference shingles (byte strings, not the hashes the stage uses) of every document."""
    return {k: set(shingles(normalize(t))) for k, t in docs.items()}


def true_pairs(sets: dict[str, set[bytes]], min_j: float = 0.5) -> dict[tuple[str, str], float]:
    """Exact Jaccard of every pair sharing a shingle, kept when >= ``min_j``."""
    index = defaultdict(set)
    for k, s in sets.items():
        for sh in s:
            index[sh].add(k)
    pairs = {}
    for k, s in sets.items():
        candidates = set().union(*(index[sh] for sh in s)) if s else set()
        for other in candidates:
            if other > k:
                j = len(s & sets[other]) / len(s | sets[other])
                if j >= min_j:
                    pairs[(k, other)] = j
    return pairs


def evaluate(
    cluster: dict[str, str], pairs: dict[tuple[str, str], float], sets: dict[str, set[bytes]], threshold: float = 0.8
) -> dict:
    """Recall of the pairs >= threshold; for removed documents, whether a partner >= threshold shares
    their cluster (precision), and their best true Jaccard to any other member of the cluster."""
    high = [(a, b) for (a, b), j in pairs.items() if j >= threshold]
    found = sum(cluster[a] == cluster[b] for a, b in high)
    partners = defaultdict(set)
    for a, b in high:
        partners[a].add(b)
        partners[b].add(a)
    members = defaultdict(list)
    for d, c in cluster.items():
        members[c].append(d)
    removed = [d for d, c in cluster.items() if c != d]
    justified = sum(any(cluster[p] == cluster[d] for p in partners[d]) for d in removed)
    strict = sum(cluster[d] in partners[d] for d in removed)

    def jac(a, b):
        return len(sets[a] & sets[b]) / max(1, len(sets[a] | sets[b]))

    best = [max(jac(d, m) for m in members[cluster[d]] if m != d) for d in removed]
    return {
        "pairs_ge_threshold": len(high),
        "recall": found / max(1, len(high)),
        "removed": len(removed),
        "precision": justified / max(1, len(removed)),
        "precision_vs_kept": strict / max(1, len(removed)),
        "min_removed_jaccard": min(best, default=1.0),
        "removed_below_0_5": sum(j < 0.5 for j in best),
    }


def run(docs: dict[str, str], stage: MinHashDedup, engine: str, spark=None) -> dict[str, str]:
    ids = list(docs)
    n = len(ids)
    table = pa.table(
        {"id": ids, "url": [""] * n, "date": [""] * n, "source": ["eval"] * n, "text": [docs[i] for i in ids]},
        schema=DOC_SCHEMA,
    )
    if engine == "local":
        result = stage.run_local(table)
        out = pa.concat_tables(
            [result.kept.select(["id", "dup_cluster"]), result.dropped.select(["id", "dup_cluster"])]
        )
        return dict(zip(out.column("id").to_pylist(), out.column("dup_cluster").to_pylist()))
    from pipelines.global_runners import run_global

    df = spark.createDataFrame(table.to_pandas()).repartition(4)
    return {r.id: r.dup_cluster for r in run_global(df, stage).select("id", "dup_cluster").collect()}


SETTINGS = {  # label -> stage settings; "default" is what a config with just `stage: minhash_dedup` runs
    "default (verify exact)": {},
    "verify signature": {"verify": "signature"},
    "no verification": {"verify": "none"},
    "optimized bands, exact": {"optimize_bands": True},
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=["spark", "local"], default="spark")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--json", type=Path, help="also write the figures here, one entry per setting")
    args = ap.parse_args()
    docs = build_corpus(args.seed)
    t0 = time.perf_counter()
    sets = shingle_sets(docs)
    pairs = true_pairs(sets)
    print(
        f"corpus: {len(docs)} documents, {sum(j >= args.threshold for j in pairs.values())} true pairs with "
        f"J >= {args.threshold} "
        f"(brute force {time.perf_counter() - t0:.1f}s)"
    )
    spark = None
    if args.engine == "spark":
        from pipelines.spark import get_spark

        spark = get_spark("local[2]", app_name="dedup-eval")
    print(
        f"{'setting':<26}{'recall':>8}{'precision':>11}{'vs kept':>9}{'removed':>9}{'min J':>7}{'J<0.5':>7}{'sec':>7}"
    )
    results = {}
    for label, settings in SETTINGS.items():
        t0 = time.perf_counter()
        m = evaluate(
            run(docs, MinHashDedup(threshold=args.threshold, **settings), args.engine, spark),
            pairs,
            sets,
            args.threshold,
        )
        m["seconds"] = round(time.perf_counter() - t0, 1)
        results[label] = m
        print(
            f"{label:<26}{m['recall']:>8.3f}{m['precision']:>11.3f}{m['precision_vs_kept']:>9.3f}{m['removed']:>9}"
            f"{m['min_removed_jaccard']:>7.2f}{m['removed_below_0_5']:>7}{m['seconds']:>7.1f}"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {"documents": len(docs), "threshold": args.threshold, "engine": args.engine, "settings": results},
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
