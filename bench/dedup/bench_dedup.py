"""MinHash dedup throughput and memory on synthetic corpora, against datatrove's MinhashDedup.

The corpus: N documents of 150-600 words drawn (Zipf-like) from the vocabulary of the real documents
in ../shared/data/documents; 15% are near copies (1-5% of words edited) and 5% exact copies of an
earlier document. Written once to /tmp/ccpretrain-bench/dedup/N as Parquet (ours) and, when
datatrove runs, JSONL.

Each engine runs in its own process, measured from /proc (bench/common/proctree.py): wall and CPU seconds,
documents/s per core (documents / wall seconds / cores), peak RSS of the JVM (the local executor)
and of the largest Python process. Both write their full output. datatrove (5-grams, 14x8, its
default English word tokenizer; separate venv from bench/datatrove/datatrove_env.sh) runs its four steps
with as many workers as we give Spark cores. Agreement = |removed by both| / |removed by either|.
For our runs, "min J" / "J<0.5" = for each removed document its best true Jaccard (hashed shingles)
to another member of its cluster: the minimum, and how many are below 0.5.

    python -m bench.dedup.bench_dedup --sizes 50000 100000 [--cores 2] [--no-datatrove] [--json out.json]
    python -m bench.dedup.bench_dedup --sizes 100000 1000000 --no-datatrove --driver-memory 1500m  # memory

``--json PATH`` writes {"sizes": {N: {"ours": {...}, "datatrove": {...}, "ratio_docs_per_s_per_core":
x}}, "ratio_docs_per_s_per_core": x at the largest size with both engines, "peak_rss_mb": {N: {jvm,
python, tree}} (ours), "quality": bench/dedup/dedup_eval.py's figures per setting, "recall" and
"removed_below_0_5" of the default setting there}. Engine entries: docs, seconds, cpu_seconds,
docs_per_s_per_core, peak_rss_mb_*, removed (and for ours min_removed_jaccard, removed_below_0_5, and
first_removed_in_our_clusters: the share of the first engine's removals that ours puts in a duplicate
cluster, which does not depend on which copy of a cluster each engine keeps).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import subprocess
import sys
import time
from pathlib import Path

from bench.common.paths import ROOT, SHARED
from bench.datatrove.environment import datatrove_python

WORK = Path("/tmp/ccpretrain-bench/dedup")


def make_corpus(n: int, out: Path, seed: int = 0, files: int = 2) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.support.near_duplicates import mutate, real_documents

    if (out / "_DONE").exists():
        return
    rng = random.Random(seed)
    words = [w for text in real_documents(SHARED) for w in text.split()]
    vocab = sorted(set(words))
    cumulative = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(vocab))))  # once, not per document
    texts: list[str] = []
    for i in range(n):
        r = rng.random()
        if texts and r < 0.15:
            texts.append(mutate(rng.choice(texts), rng.uniform(0.01, 0.05), rng, vocab))
        elif texts and r < 0.20:
            texts.append(rng.choice(texts))
        else:
            texts.append(" ".join(rng.choices(vocab, cum_weights=cumulative, k=rng.randint(150, 600))))
    ids = [f"doc{i:08d}" for i in range(n)]
    (out / "parquet").mkdir(parents=True, exist_ok=True)
    step = -(-n // files)
    for f in range(files):
        part = slice(f * step, (f + 1) * step)
        k = len(ids[part])
        table = pa.table(
            {"id": ids[part], "url": [""] * k, "date": [""] * k, "source": ["bench"] * k, "text": texts[part]}
        )
        pq.write_table(table, out / "parquet" / f"part-{f:03d}.parquet", row_group_size=2000)
    (out / "_DONE").write_text("")


def jsonl_corpus(out: Path) -> Path:
    """The corpus as JSONL (id, text) for datatrove, one file per Parquet file, written once."""
    import pyarrow.parquet as pq

    folder = out / "jsonl"
    if not (out / "_JSONL_DONE").exists():  # the marker stays outside: datatrove reads every file
        folder.mkdir(exist_ok=True)
        for path in sorted((out / "parquet").glob("*.parquet")):
            table = pq.read_table(path, columns=["id", "text"])
            with open(folder / f"{path.stem}.jsonl", "w", encoding="utf-8") as fh:
                for i, t in zip(table.column("id").to_pylist(), table.column("text").to_pylist()):
                    fh.write(json.dumps({"id": i, "text": t}) + "\n")
        (out / "_JSONL_DONE").write_text("")
    return folder


def removal_quality(out: Path) -> dict:
    """Best true Jaccard (hashed shingles) of each removed document to another member of its cluster."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from dataprep.dedup.minhash import MinHashDedup, jaccard

    table = pq.read_table(
        out, columns=["id", "text", "dup_cluster", "dup_cluster_size"], filters=[("dup_cluster_size", ">", 1)]
    )
    table = table.take(pc.sort_indices(table, [("dup_cluster", "ascending")]))
    sets = MinHashDedup().shingle_sets(table.column("text").to_pylist())
    ids, clusters = table.column("id").to_pylist(), table.column("dup_cluster").to_pylist()
    best, start = [], 0
    for end in range(1, len(ids) + 1):
        if end == len(ids) or clusters[end] != clusters[start]:
            for i in range(start, end):
                if ids[i] != clusters[i]:
                    best.append(max(jaccard(sets[i], sets[j]) for j in range(start, end) if j != i))
            start = end
    return {"min_removed_jaccard": round(min(best, default=1.0), 3), "removed_below_0_5": sum(j < 0.5 for j in best)}


def run_ours(corpus: Path, cores: int, verify: str, work: Path, memory: str = "") -> dict:
    """In this process: Spark local[cores], run_global, write the full output like a pipeline step."""
    from pyspark.sql import functions as F

    from bench.common.proctree import TreeMonitor
    from dataprep.dedup.minhash import MinHashDedup
    from pipelines.global_runners import run_global
    from pipelines.spark import get_spark

    conf = {"spark.sql.shuffle.partitions": str(4 * cores), **({"spark.driver.memory": memory} if memory else {})}
    spark = get_spark(f"local[{cores}]", app_name="bench-dedup", conf=conf)
    df = spark.read.parquet(str(corpus / "parquet"))
    n = df.count()
    monitor = TreeMonitor().start()
    t0 = time.perf_counter()
    out = run_global(df, MinHashDedup(verify=verify))
    out.write.mode("overwrite").parquet(str(work / "out"))
    seconds = time.perf_counter() - t0
    report = {"docs": n, "seconds": round(seconds, 1), **monitor.stop()}
    removed = [
        r.id
        for r in spark.read.parquet(str(work / "out")).where(F.col("drop_reason").isNotNull()).select("id").collect()
    ]
    (work / "removed_ids.txt").write_text("\n".join(removed))
    report["removed"] = len(removed)
    spark.stop()
    report.update(removal_quality(work / "out"))
    return report


def clustered_ids(out: Path) -> set[str]:
    """Ids in a duplicate cluster of 2+ (kept or removed) in one of our outputs."""
    import pyarrow.parquet as pq

    return set(pq.read_table(out, columns=["id"], filters=[("dup_cluster_size", ">", 1)]).column("id").to_pylist())


def _child(module: str, args: list[str], python: str = sys.executable) -> dict:
    proc = subprocess.run([python, "-m", module, *args], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise RuntimeError(f"{module} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[50_000, 100_000])
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--verify", nargs="+", default=["exact"], choices=["none", "signature", "exact"])
    ap.add_argument("--no-datatrove", action="store_true")
    ap.add_argument("--datatrove-max", type=int, default=100_000, help="run datatrove only up to this many documents")
    ap.add_argument(
        "--driver-memory", help="spark.driver.memory (the local executor's heap); default: pipelines.spark's"
    )
    ap.add_argument("--json", type=Path, help="write the figures here (see the module docstring)")
    ap.add_argument("--one", nargs=5, metavar=("CORPUS", "CORES", "VERIFY", "WORK", "MEMORY"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        corpus, cores, verify, work, memory = args.one
        print(json.dumps(run_ours(Path(corpus), int(cores), verify, Path(work), memory)))
        return 0
    report: dict = {
        "cores": args.cores,
        "driver_memory": args.driver_memory or "default",
        "sizes": {},
        "peak_rss_mb": {},
    }
    print(
        f"{'engine':<26}{'docs':>9}{'wall s':>8}{'cpu s':>8}{'docs/s/core':>12}{'JVM MB':>8}{'py MB':>7}"
        f"{'removed':>9}{'agree':>7}{'min J':>7}{'J<0.5':>6}"
    )
    for n in args.sizes:
        corpus = WORK / str(n)
        make_corpus(n, corpus, files=args.cores)
        runs = []
        if not args.no_datatrove and n <= args.datatrove_max:
            python = datatrove_python()
            work = WORK / f"{n}-datatrove"
            subprocess.run(["rm", "-rf", str(work)])
            jsonl = jsonl_corpus(corpus)
            runs.append(
                (
                    "datatrove",
                    "datatrove MinhashDedup",
                    work,
                    lambda w=work: _child(
                        "bench.datatrove.datatrove_minhash", [str(jsonl), str(w), str(args.cores)], python
                    ),
                )
            )
        for verify in args.verify:
            work = WORK / f"{n}-ours-{verify}"
            work.mkdir(parents=True, exist_ok=True)
            key = "ours" if verify == "exact" else f"ours_verify_{verify}"
            runs.append(
                (
                    key,
                    f"ccpretrain verify={verify}",
                    work,
                    lambda w=work, v=verify: _child(
                        "bench.dedup.bench_dedup",
                        ["--one", str(corpus), str(args.cores), v, str(w), args.driver_memory or ""],
                    ),
                )
            )
        entry, reference = {}, None
        for key, name, work, run in runs:
            r = run()
            r["docs_per_s_per_core"] = round(n / r["seconds"] / args.cores, 1)
            removed = set((work / "removed_ids.txt").read_text().split())
            reference = removed if reference is None else reference
            r["agreement_with_first"] = round(len(removed & reference) / max(1, len(removed | reference)), 3)
            if key != "datatrove" and (work / "out").exists():  # which copy a cluster keeps aside
                r["first_removed_in_our_clusters"] = round(
                    len(reference & clustered_ids(work / "out")) / max(1, len(reference)), 3
                )
            entry[key] = r
            quality = (
                f"{r['min_removed_jaccard']:>7.2f}{r['removed_below_0_5']:>6}" if "min_removed_jaccard" in r else ""
            )
            print(
                f"{name:<26}{n:>9}{r['seconds']:>8.1f}{r['cpu_seconds']:>8.1f}"
                f"{r['docs_per_s_per_core']:>12.0f}{r.get('peak_rss_mb_jvm', 0):>8}"
                f"{r['peak_rss_mb_python']:>7}{len(removed):>9}{r['agreement_with_first']:>7.3f}{quality}",
                flush=True,
            )
        if "ours" in entry and "datatrove" in entry:
            entry["ratio_docs_per_s_per_core"] = round(
                entry["ours"]["docs_per_s_per_core"] / entry["datatrove"]["docs_per_s_per_core"], 2
            )
            report["ratio_docs_per_s_per_core"] = entry["ratio_docs_per_s_per_core"]
            print(
                f"ours / datatrove documents/s per core at {n}: {entry['ratio_docs_per_s_per_core']:.2f}x", flush=True
            )
        if "ours" in entry:
            report["peak_rss_mb"][n] = {k: entry["ours"][f"peak_rss_mb_{k}"] for k in ("jvm", "python", "tree")}
        report["sizes"][n] = entry
    if args.json:
        quality_json = WORK / "dedup_eval.json"
        subprocess.run(
            [sys.executable, "-m", "bench.dedup.dedup_eval", "--json", str(quality_json)], check=True, cwd=ROOT
        )
        quality = json.loads(quality_json.read_text())
        default = quality["settings"]["default (verify exact)"]
        report.update(quality=quality, recall=default["recall"], removed_below_0_5=default["removed_below_0_5"])
        args.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
