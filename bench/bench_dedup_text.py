"""Paragraph dedup and decontamination: documents/s per core and peak memory as the corpus grows.

The corpus: N documents of 8-20 lines, each line 8-20 words drawn (Zipf-like) from the vocabulary of
the real documents in ../shared/data/documents; every document also carries 0-3 lines from a pool of
200 site-template lines, and 2% carry a 40-word passage of the evaluation set (500 such passages,
JSONL). Written once to /tmp/ccpretrain-bench/dedup_text/N.

- paragraph_dedup (unit line, keep none, max_documents 5) on Spark local[cores], the full output
  written like a pipeline step, in a 1 GB driver heap at every size; baseline in the same run: exact_dedup on the same documents. Measured
  from /proc (bench/proctree.py): wall and CPU seconds, peak RSS of the JVM and the largest Python worker.
- decontaminate (13-grams) in this process on one core, batches of 1,000 documents; baseline: the
  same documents' 13-gram hashes alone (``normalize.shingle_hashes``). Peak RSS of this process.

    python bench/bench_dedup_text.py --sizes 10000 100000 [--cores 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
WORK = Path("/tmp/ccpretrain-bench/dedup_text")


def make_corpus(n: int, out: Path, seed: int = 0) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from bench.dedup_eval import real_documents

    if (out / "_DONE").exists():
        return
    rng = random.Random(seed)
    words = [w for text in real_documents() for w in text.split()]
    vocab = sorted(set(words))
    cumulative = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(vocab))))

    def line(k: int) -> str:
        return " ".join(rng.choices(vocab, cum_weights=cumulative, k=k))

    templates = [line(rng.randint(4, 12)) for _ in range(200)]
    passages = [line(40) for _ in range(500)]
    texts = []
    for _ in range(n):
        lines = [line(rng.randint(8, 20)) for _ in range(rng.randint(8, 20))]
        for t in rng.sample(templates, rng.randint(0, 3)):
            lines.insert(rng.randrange(len(lines) + 1), t)
        if rng.random() < 0.02:
            lines.insert(rng.randrange(len(lines) + 1), rng.choice(passages))
        texts.append("\n".join(lines))
    out.mkdir(parents=True, exist_ok=True)
    (out / "eval.jsonl").write_text("".join(json.dumps({"id": f"p{i}", "text": p}) + "\n" for i, p in enumerate(passages)))
    ids = [f"doc{i:08d}" for i in range(n)]
    table = pa.table({"id": ids, "url": [""] * n, "date": [""] * n, "source": ["bench"] * n, "text": texts})
    (out / "parquet").mkdir(exist_ok=True)
    pq.write_table(table, out / "parquet" / "part-000.parquet", row_group_size=2000)
    (out / "_DONE").write_text("")


def run_spark(corpus: Path, cores: int) -> dict:
    """paragraph_dedup and, as the baseline, exact_dedup: each written in full, measured from /proc."""
    from proctree import TreeMonitor
    from pyspark.sql import functions as F

    from dataprep.dedup.exact import ExactDedup
    from dataprep.dedup.paragraphs import ParagraphDedup
    from pipelines.dedup import run_exact
    from pipelines.paragraph_dedup import run_paragraph_dedup
    from pipelines.spark import get_spark

    spark = get_spark(f"local[{cores}]", app_name="bench-dedup-text", conf={"spark.sql.shuffle.partitions": str(4 * cores), "spark.driver.memory": "1g"})
    df = spark.read.parquet(str(corpus / "parquet")).repartition(4 * cores)
    n = df.count()
    run_exact(df.limit(2000), ExactDedup()).count()  # warm-up: JVM code paths and Python workers
    out = {}
    stage = ParagraphDedup(keep="none", max_documents=5, min_remaining_chars=20)
    for name, run in (("exact_dedup", lambda: run_exact(df, ExactDedup())), ("paragraph_dedup", lambda: run_paragraph_dedup(df, stage))):
        monitor = TreeMonitor().start()
        t0 = time.perf_counter()
        run().write.mode("overwrite").parquet(str(corpus / f"out-{name}"))
        seconds = time.perf_counter() - t0
        report = {"docs": n, "seconds": round(seconds, 1), "docs_per_s_per_core": round(n / seconds / cores), **monitor.stop()}
        report.pop("peak_python_process")
        report["dropped"] = spark.read.parquet(str(corpus / f"out-{name}")).where(F.col("drop_reason").isNotNull()).count()
        report["counters"] = dict(stage.take_counters()) if name == "paragraph_dedup" else {}
        out[name] = report
        spark.catalog.clearCache()
    spark.stop()
    return out


def run_decontaminate(corpus: Path) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dataprep.dedup.decontaminate import Decontaminate
    from dataprep.dedup.normalize import shingle_hashes

    stage = Decontaminate(eval_sets=[str(corpus / "eval.jsonl")])
    stage.eval_ngrams()  # loaded once per worker, like on Spark
    out = {}
    for name in ("shingle_hashes", "decontaminate"):
        t0, n, found = time.perf_counter(), 0, 0
        for batch in pq.ParquetFile(corpus / "parquet" / "part-000.parquet", pre_buffer=False).iter_batches(1000, columns=["id", "url", "date", "source", "text"]):
            if name == "decontaminate":
                _, reasons = stage.process(pa.Table.from_batches([batch]))
                found += sum(r is not None for r in reasons)
            else:
                shingle_hashes(batch.column("text").to_pylist(), 13, 13)
            n += batch.num_rows
        seconds = time.perf_counter() - t0
        out[name] = {"docs": n, "seconds": round(seconds, 1), "docs_per_s_per_core": round(n / seconds), "contaminated": found}
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 100000])
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # one measurement in a fresh process, so peaks do not carry over between sizes
        corpus = WORK / args.child[1]
        print(json.dumps(run_spark(corpus, args.cores) if args.child[0] == "spark" else run_decontaminate(corpus)))
        return 0
    import subprocess

    results = {}
    for n in args.sizes:
        make_corpus(n, WORK / str(n))
        figures = {}
        for kind in ("spark", "decontaminate"):
            proc = subprocess.run([sys.executable, __file__, "--cores", str(args.cores), "--child", kind, str(n)], capture_output=True, text=True, cwd=ROOT)
            if proc.returncode:
                raise RuntimeError(proc.stderr[-3000:])
            figures[kind] = json.loads(proc.stdout.strip().splitlines()[-1])
        results[n] = figures
        spark, dec = figures["spark"], figures["decontaminate"]
        para, exact = spark["paragraph_dedup"], spark["exact_dedup"]
        print(f"\n{n} documents ({args.cores} cores)")
        print(f"  paragraph_dedup {para['docs_per_s_per_core']:>8} docs/s/core  {para['docs_per_s_per_core'] / exact['docs_per_s_per_core']:.2f}x exact_dedup's"
              f"  peak RSS JVM {para['peak_rss_mb_jvm']} MB, Python worker {para['peak_rss_mb_python']} MB  counters {para['counters']}  dropped {para['dropped']}")
        print(f"  exact_dedup     {exact['docs_per_s_per_core']:>8} docs/s/core  peak RSS JVM {exact['peak_rss_mb_jvm']} MB, Python worker {exact['peak_rss_mb_python']} MB")
        d, base = dec["decontaminate"], dec["shingle_hashes"]
        print(f"  decontaminate   {d['docs_per_s_per_core']:>8} docs/s/core  {d['docs_per_s_per_core'] / base['docs_per_s_per_core']:.2f}x hashing 13-grams alone"
              f"  peak RSS {dec['peak_rss_mb']} MB  contaminated {d['contaminated']}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
