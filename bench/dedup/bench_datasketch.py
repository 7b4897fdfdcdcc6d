"""Our MinHash against datasketch on the same documents: signatures per CPU second (one process, so per
core), and LSH recall and candidate precision at the same bands x rows, on dedup_eval's corpus of real
documents with planted near-duplicates of known Jaccard.

    python -m bench.dedup.bench_datasketch [--json /tmp/datasketch.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import datasketch

from bench.dedup.dedup_eval import build_corpus, shingle_sets, true_pairs
from dataprep.dedup.minhash import MinHashDedup
from dataprep.dedup.normalize import normalize, shingles

NUM_PERM, BANDS, ROWS, THRESHOLD = 112, 14, 8, 0.8


def ours(texts: list[str]) -> tuple[float, list[set]]:
    start = time.process_time()
    stage = MinHashDedup(num_perm=NUM_PERM, bands=BANDS, rows=ROWS)
    sigs, _ = stage.signatures(texts)
    keys = stage.band_keys(sigs)
    seconds = time.process_time() - start
    return seconds, [set(row.tolist()) for row in keys]


def reference(texts: list[str]) -> tuple[float, datasketch.MinHashLSH, list]:
    start = time.process_time()
    hashes = []
    for text in texts:
        m = datasketch.MinHash(num_perm=NUM_PERM, seed=1)
        m.update_batch(shingles(normalize(text), chinese_words=True))
        hashes.append(m)
    seconds = time.process_time() - start
    lsh = datasketch.MinHashLSH(num_perm=NUM_PERM, params=(BANDS, ROWS))
    for i, m in enumerate(hashes):
        lsh.insert(i, m)
    return seconds, lsh, hashes


def scores(candidates: set[tuple[int, int]], pairs: dict[tuple[int, int], float]) -> dict:
    high = {p for p, j in pairs.items() if j >= THRESHOLD}
    return {
        "recall": len(candidates & high) / max(1, len(high)),
        "candidate_precision": len(candidates & high) / max(1, len(candidates)),
        "candidates": len(candidates),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    docs = build_corpus()
    ids = list(docs)
    texts = [docs[i] for i in ids]
    sets = shingle_sets(docs)
    index = {d: n for n, d in enumerate(ids)}
    pairs = {tuple(sorted((index[a], index[b]))): j for (a, b), j in true_pairs(sets).items()}
    our_seconds, keys = ours(texts)
    buckets: dict = {}
    for n, row in enumerate(keys):
        for key in row:
            buckets.setdefault(key, []).append(n)
    our_candidates = {(a, b) for members in buckets.values() for a in members for b in members if a < b}
    ref_seconds, lsh, hashes = reference(texts)
    ref_candidates = {tuple(sorted((n, m))) for n, h in enumerate(hashes) for m in lsh.query(h) if m != n}
    words = sum(len(t.split()) for t in texts)
    result = {
        "documents": len(texts),
        "words": words,
        "num_perm": NUM_PERM,
        "bands": BANDS,
        "rows": ROWS,
        "ours": {
            "cpu_s": our_seconds,
            "signatures_per_cpu_s": len(texts) / our_seconds,
            **scores(our_candidates, pairs),
        },
        "datasketch": {
            "cpu_s": ref_seconds,
            "signatures_per_cpu_s": len(texts) / ref_seconds,
            **scores(ref_candidates, pairs),
        },
    }
    result["cpu_ratio_datasketch_over_ours"] = ref_seconds / our_seconds
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
