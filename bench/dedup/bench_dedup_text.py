"""Paragraph and sentence-span dedup and decontamination: documents/s per core and peak memory as the
corpus grows, against datatrove's sentence dedup.

The corpus: N documents of 8-20 sentences, one a line, each 8-20 words drawn (Zipf-like) from the
vocabulary of the real documents in ../shared/data/documents and ending on a word of 6+ letters (spaCy,
datatrove's English sentence splitter, keeps "a." or "s." as one token and would join two lines); every document also
carries 0-3 blocks of 1-4 sentences from a pool of 200 site templates, 5% repeat a run of 3-8 lines of an earlier
document, and 2% carry a 40-word passage of the evaluation set (500 such passages, JSONL). Written once to
/tmp/ccpretrain-bench/dedup_text/N as Parquet and, for datatrove, JSONL, split round-robin over ``--cores`` files (so
datatrove's "first copy", by position in a file, is the smallest id, as ours).

Each run is its own process, measured from /proc (bench/common/proctree.py): wall and CPU seconds of the
whole process tree, documents per CPU second ("per core"), peak RSS of the JVM and of the largest
Python process. Ours run on Spark local[cores] with a fixed driver heap (``--driver-memory``, 1g), the
full output written like a pipeline step; the JVM logs its collections, and "heap after GC" is the most
the heap held right after one (what it could not free), against the cap.

- sentence: ``paragraph_dedup`` unit sentence, span 3, keep first, max_documents 1, documents dropped
  only when empty, against datatrove 0.10.1's SentenceDedupSignature / SentenceFindDedups /
  SentenceDedupFilter (3 sentences, min_doc_words 0, min_num_sentences 0; ``--cores`` workers,
  bench/datatrove/datatrove_sentence_dedup.py in its own venv). Agreement: the removed sentences (lines) of every
  document, |removed by both| / |removed by either|.
- line: ``paragraph_dedup`` unit line, keep none, max_documents 5 (site boilerplate).
- decontaminate (13-grams) in one process on one core, batches of 1,000 documents; baseline: the same
  documents' 13-gram hashes alone (``normalize.shingle_hashes``).

    python -m bench.dedup.bench_dedup_text --sizes 10000 100000 300000 [--cores 2] [--datatrove-max 100000] \\
        [--json out.json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from bench.common.paths import ROOT, SHARED
from bench.datatrove.environment import datatrove_python

WORK = Path("/tmp/ccpretrain-bench/dedup_text")
DATATROVE_VENV = "/work/venv-datatrove"


def make_corpus(n: int, out: Path, files: int, seed: int = 0) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tests.support.near_duplicates import real_documents

    stamp = f"corpus v2, {files} files"  # a corpus written by an older version of this script is rewritten
    if (out / "_DONE").exists() and (out / "_DONE").read_text() == stamp:
        return
    shutil.rmtree(out, ignore_errors=True)
    rng = np.random.default_rng(seed)
    vocab = sorted({w.lower() for text in real_documents(SHARED) for w in text.split() if w.isalpha()})
    weights = 1.0 / np.arange(1, len(vocab) + 1)
    pool: list[int] = []

    endings = [w for w in vocab if len(w) >= 6]

    def sentence(k: int) -> str:
        nonlocal pool
        if len(pool) < k:
            pool = rng.choice(len(vocab), size=1_000_000, p=weights / weights.sum()).tolist()
        words = " ".join(map(vocab.__getitem__, pool[-k:-1]))
        words += " " + endings[pool[-1] % len(endings)]
        del pool[-k:]
        return words[0].upper() + words[1:] + "."

    templates = [[sentence(int(rng.integers(4, 13))) for _ in range(int(rng.integers(1, 5)))] for _ in range(200)]
    passages = [sentence(40) for _ in range(500)]
    docs: list[list[str]] = []
    for i in range(n):
        lines = [sentence(int(rng.integers(8, 21))) for _ in range(int(rng.integers(8, 21)))]
        blocks = [templates[t] for t in rng.choice(len(templates), size=int(rng.integers(0, 4)), replace=False)]
        if docs and rng.random() < 0.05:
            earlier = docs[int(rng.integers(len(docs)))]
            start = int(rng.integers(len(earlier)))
            blocks.append(earlier[start : start + int(rng.integers(3, 9))])
        if rng.random() < 0.02:
            blocks.append([passages[int(rng.integers(len(passages)))]])
        for block in blocks:
            at = int(rng.integers(len(lines) + 1))
            lines[at:at] = block
        docs.append(lines)
    texts = ["\n".join(lines) for lines in docs]
    del docs
    ids = [f"doc{i:08d}" for i in range(n)]
    (out / "parquet").mkdir(parents=True, exist_ok=True)
    (out / "jsonl").mkdir(exist_ok=True)
    for f in range(files):  # round-robin: document i is the (i // files)-th of file i % files
        part = slice(f, None, files)
        k = len(ids[part])
        table = pa.table(
            {"id": ids[part], "url": [""] * k, "date": [""] * k, "source": ["bench"] * k, "text": texts[part]}
        )
        pq.write_table(table, out / "parquet" / f"part-{f:03d}.parquet", row_group_size=2000)
        with open(out / "jsonl" / f"part-{f:03d}.jsonl", "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps({"id": i, "text": t}) + "\n" for i, t in zip(ids[part], texts[part]))
    (out / "eval.jsonl").write_text(
        "".join(json.dumps({"id": f"p{i}", "text": p}) + "\n" for i, p in enumerate(passages))
    )
    (out / "_DONE").write_text(stamp)


def stage_for(mode: str):
    from dataprep.dedup.paragraphs import ParagraphDedup

    if mode == "sentence":
        return ParagraphDedup(unit="sentence", span=3, keep="first", max_documents=1, min_remaining_chars=1)
    return ParagraphDedup(unit="line", keep="none", max_documents=5, min_remaining_chars=20)


def heap_after_gc(log: Path) -> dict:
    """From the JVM's -Xlog:gc lines ("... 512M->96M(1024M) ..."): the most the heap held after a
    collection, the cap, and how many collections were full ones."""
    after, cap, full = 0, 0, 0
    for line in log.read_text().splitlines():
        m = re.search(r"(\d+)M->(\d+)M\((\d+)M\)", line)
        if m:
            after, cap = max(after, int(m.group(2))), max(cap, int(m.group(3)))
            full += "Pause Full" in line
    return {"heap_after_gc_mb": after, "heap_cap_mb": cap, "full_gcs": full}


def run_spark(corpus: Path, mode: str, cores: int, memory: str, work: Path) -> dict:
    """One ``paragraph_dedup`` on Spark local[cores], written in full; measured from /proc and the GC log."""
    from pyspark.sql import functions as F

    from bench.common.proctree import TreeMonitor
    from pipelines.global_runners import run_global
    from pipelines.spark import LOCAL_CONF, get_spark

    work.mkdir(parents=True, exist_ok=True)
    gc_log = work / "gc.log"
    java = f"{LOCAL_CONF['spark.driver.extraJavaOptions']} -Xlog:gc:file={gc_log}"
    conf = {
        "spark.sql.shuffle.partitions": str(4 * cores),
        "spark.driver.memory": memory,
        "spark.driver.extraJavaOptions": java,
    }
    spark = get_spark(f"local[{cores}]", app_name="bench-dedup-text", conf=conf)
    df = spark.read.parquet(str(corpus / "parquet"))
    n = df.count()
    stage = stage_for(mode)
    run_global(df.limit(2000), stage).count()  # warm-up: JVM code paths and Python workers
    stage.take_counters()
    monitor = TreeMonitor().start()
    t0 = time.perf_counter()
    run_global(df, stage).write.mode("overwrite").parquet(str(work / "out"))
    seconds = time.perf_counter() - t0
    report = {"docs": n, "seconds": round(seconds, 1), **monitor.stop()}
    report.pop("peak_python_process")
    report["dropped"] = spark.read.parquet(str(work / "out")).where(F.col("drop_reason").isNotNull()).count()
    report["counters"] = dict(stage.take_counters())
    spark.stop()
    return {**report, **heap_after_gc(gc_log)}


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
        batches = (
            b
            for path in sorted((corpus / "parquet").glob("*.parquet"))
            for b in pq.ParquetFile(path, pre_buffer=False).iter_batches(
                1000, columns=["id", "url", "date", "source", "text"]
            )
        )
        for batch in batches:
            if name == "decontaminate":
                _, reasons = stage.process(pa.Table.from_batches([batch]))
                found += sum(r is not None for r in reasons)
            else:
                shingle_hashes(batch.column("text").to_pylist(), 13, 13)
            n += batch.num_rows
        seconds = time.perf_counter() - t0
        out[name] = {
            "docs": n,
            "seconds": round(seconds, 1),
            "docs_per_s_per_core": round(n / seconds),
            "contaminated": found,
        }
    # VmHWM, not ru_maxrss: Linux carries the forking parent's peak into ru_maxrss across exec
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    out["peak_rss_mb"] = round(int(status["VmHWM"].split()[0]) / 1024)
    return out


def removed_lines(corpus: Path, kept: dict[str, str]) -> dict[str, Counter]:
    """Per document, the lines (sentences here) its input has and ``kept`` (id -> text) has not."""
    import pyarrow.parquet as pq

    out = {}
    for path in sorted((corpus / "parquet").glob("*.parquet")):
        table = pq.read_table(path, columns=["id", "text"])
        for doc_id, text in zip(table.column("id").to_pylist(), table.column("text").to_pylist()):
            gone = Counter(line.strip() for line in text.split("\n")) - Counter(
                line.strip() for line in kept.get(doc_id, "").split("\n")
            )
            if gone:
                out[doc_id] = gone
    return out


def kept_ours(out: Path) -> dict[str, str]:
    import pyarrow.parquet as pq

    table = pq.read_table(out, columns=["id", "text", "drop_reason"])
    return {i: t for i, t, r in zip(*(table.column(c).to_pylist() for c in ("id", "text", "drop_reason"))) if r is None}


def kept_datatrove(out: Path) -> dict[str, str]:
    kept = {}
    for path in sorted(out.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            kept.update((row["id"], row["text"]) for row in map(json.loads, fh))
    return kept


def agreement(a: dict[str, Counter], b: dict[str, Counter]) -> dict:
    both = sum(sum((a[d] & b[d]).values()) for d in a.keys() & b.keys())
    either = sum(sum((a.get(d, Counter()) | b.get(d, Counter())).values()) for d in a.keys() | b.keys())
    return {
        "removed_ours": sum(sum(c.values()) for c in a.values()),
        "removed_datatrove": sum(sum(c.values()) for c in b.values()),
        "removed_by_both": both,
        "agreement": round(both / max(1, either), 4),
    }


def _child(module: str, args: list[str], python: str = sys.executable) -> dict:
    proc = subprocess.run([python, "-m", module, *args], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode:
        raise RuntimeError(f"{module} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 100000])
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument(
        "--driver-memory", default="1g", help="spark.driver.memory (the local executor's heap), the same at every size"
    )
    parser.add_argument(
        "--datatrove-max", type=int, default=100_000, help="run datatrove only up to this many documents"
    )
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--work", type=Path, default=WORK, help="where the corpora and outputs go")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # one measurement in a fresh process, so peaks do not carry over
        kind, corpus = args.child[0], args.work / args.child[1]
        report = (
            run_decontaminate(corpus)
            if kind == "decontaminate"
            else run_spark(corpus, kind, args.cores, args.driver_memory, corpus / f"ours-{kind}")
        )
        print(json.dumps(report))
        return 0
    results = {"cores": args.cores, "driver_memory": args.driver_memory, "sizes": {}}
    print(
        f"{'run':<24}{'docs':>9}{'wall s':>8}{'cpu s':>8}{'docs/cpu-s':>11}{'JVM MB':>8}{'py MB':>7}"
        f"{'heap/GC MB':>11}{'removed':>9}"
    )  # removed: lines (sentences), from every document
    for n in args.sizes:
        corpus = args.work / str(n)
        make_corpus(n, corpus, files=args.cores)
        own = ["--cores", str(args.cores), "--driver-memory", args.driver_memory, "--work", str(args.work)]
        runs = {
            kind: _child("bench.dedup.bench_dedup_text", [*own, "--child", kind, str(n)])
            for kind in ("sentence", "line", "decontaminate")
        }
        if n <= args.datatrove_max:
            python = datatrove_python(DATATROVE_VENV)
            work = corpus / "datatrove"
            subprocess.run(["rm", "-rf", str(work)], check=True)
            runs["datatrove"] = _child(
                "bench.datatrove.datatrove_sentence_dedup", [str(corpus / "jsonl"), str(work), str(args.cores)], python
            )
            runs["agreement"] = agreement(
                removed_lines(corpus, kept_ours(corpus / "ours-sentence" / "out")),
                removed_lines(corpus, kept_datatrove(work / "kept")),
            )
        for kind in ("sentence", "line", "datatrove"):
            r = runs.get(kind)
            if r is None:
                continue
            r["docs_per_cpu_second"] = round(n / r["cpu_seconds"])
            removed = {
                "line": r.get("counters", {}).get("segments_removed"),
                **{
                    k: runs.get("agreement", {}).get(f"removed_{e}", "")
                    for k, e in (("sentence", "ours"), ("datatrove", "datatrove"))
                },
            }[kind]
            name = {
                "sentence": "ours sentence span 3",
                "line": "ours line (boilerplate)",
                "datatrove": "datatrove SentenceDedup",
            }[kind]
            print(
                f"{name:<24}{n:>9}{r['seconds']:>8.1f}{r['cpu_seconds']:>8.1f}{r['docs_per_cpu_second']:>11}{r['peak_rss_mb_jvm']:>8}{r['peak_rss_mb_python']:>7}"
                f"{r.get('heap_after_gc_mb', ''):>11}{removed:>9}",
                flush=True,
            )
        if "datatrove" in runs:
            runs["ratio_docs_per_cpu_second"] = round(
                runs["sentence"]["docs_per_cpu_second"] / runs["datatrove"]["docs_per_cpu_second"], 2
            )
            a = runs["agreement"]
            print(
                f"  ours / datatrove docs per CPU second: {runs['ratio_docs_per_cpu_second']:.2f}x; removed "
                f"sentences: ours {a['removed_ours']},"
                f" datatrove {a['removed_datatrove']}, both {a['removed_by_both']}, agreement {a['agreement']:.3f}",
                flush=True,
            )
        d, base = runs["decontaminate"]["decontaminate"], runs["decontaminate"]["shingle_hashes"]
        print(
            f"  decontaminate {d['docs_per_s_per_core']} docs/s/core, "
            f"{d['docs_per_s_per_core'] / base['docs_per_s_per_core']:.2f}x hashing 13-grams alone,"
            f" peak RSS {runs['decontaminate']['peak_rss_mb']} MB, contaminated {d['contaminated']}",
            flush=True,
        )
        results["sizes"][n] = runs
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
