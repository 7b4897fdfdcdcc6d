"""Ingestion throughput (read WARC -> extract HTML -> language ID) in documents/s per core, on the same
WARC input, for:
  (a) our stages without Spark, auto (default), Resiliparse and Trafilatura engines, one process;
  (b) datatrove's WarcReader -> Trafilatura -> LanguageFilter in .venv-datatrove (bench/datatrove/datatrove_env.sh);
  (c) our Spark pipeline (`dataprep run` machinery) on local[N], extract + langid.
Also prints extraction quality (trafilatura-eval snippets) per engine. The whole cleaning pipeline
against datatrove's is bench/pipeline/bench_pipeline.py.

    python -m bench.pipeline.bench_ingest [--repeat 3] [--cores 2] [--skip-spark] [--skip-datatrove]

"Per core" is printed two ways: documents / wall-seconds / cores (all runs; Spark includes its task
scheduling and Parquet writes, not its start-up), and documents / CPU-seconds (single-process runs
only; robust on a busy machine). Compare the ratios printed at the end, not figures across runs.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time

from bench.common.make_bench_warc import write_bench_warcs
from bench.common.paths import SHARED
from bench.datatrove.environment import datatrove_python
from dataprep.classify.langid import LanguageID, default_model_path
from dataprep.core.config import InputConfig
from dataprep.html.charset import decode_html
from dataprep.html.extract import Extract
from dataprep.readers import iter_documents
from tests.support.snippets import snippet_scores


def run_ours(files: list[str], engine: str) -> dict:
    extract, langid = Extract(engine=engine), LanguageID()
    langid.predict(["warm up: load the model outside the timing"])
    counts = {"read": 0, "extracted": 0, "kept": 0}
    t0, cpu0 = time.perf_counter(), time.process_time()
    for path in files:
        for batch in iter_documents(path, InputConfig()):
            counts["read"] += batch.kept.num_rows
            text = extract.apply(batch.kept).kept
            counts["extracted"] += text.num_rows
            counts["kept"] += langid.apply(text).kept.num_rows
    return {**counts, "seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - cpu0}


def run_datatrove(files: list[str]) -> dict | None:
    cmd = [datatrove_python(), "-m", "bench.datatrove.datatrove_ingest", default_model_path(), *files]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stderr[-2000:], file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_spark(files: list[str], cores: int) -> dict | None:
    try:
        from dataprep.core.config import load_config
        from pipelines.pipeline_run import run_pipeline
        from pipelines.spark import get_spark
    except ImportError as exc:
        print(f"(c) skipped: {exc}", file=sys.stderr)
        return None
    spark = get_spark(f"local[{cores}]", app_name="bench-ingest")
    with tempfile.TemporaryDirectory() as out:
        config = load_config(
            {"input": {"paths": files}, "output": {"dir": out}, "stages": [{"stage": "extract"}, {"stage": "langid"}]}
        )
        t0 = time.perf_counter()
        result = run_pipeline(config, spark=spark, force=True)
        seconds = time.perf_counter() - t0
    stats = {s.stage: s for s in result.stats}
    spark.stop()
    return {
        "read": stats["extract"].docs_in,
        "extracted": stats["extract"].docs_kept,
        "kept": stats["langid"].docs_kept,
        "seconds": seconds,
        "cores": cores,
    }


def extraction_quality() -> dict:
    root = SHARED / "html" / "trafilatura-eval"
    gold = [json.loads(line) for line in (root / "gold.jsonl").open()]
    pages = [decode_html(gzip.open(root / page["file"]).read(), None) for page in gold]
    return {
        engine: snippet_scores([Extract(engine=engine).extract(p) for p in pages], gold)
        for engine in ("auto", "resiliparse", "trafilatura")
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="ingestion throughput: ours vs datatrove vs our Spark pipeline")
    parser.add_argument("--repeat", type=int, default=3, help="copies of the 200 eval pages")
    parser.add_argument("--cores", type=int, default=2, help="Spark local[N]")
    parser.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "ccpretrain-bench", "ingest"))
    parser.add_argument("--skip-spark", action="store_true")
    parser.add_argument("--skip-datatrove", action="store_true")
    args = parser.parse_args()

    files = write_bench_warcs(args.out, repeat=args.repeat, files=args.cores)
    print(
        f"input: {len(files)} WARC files, {args.repeat} x 200 pages, "
        f"{sum(os.path.getsize(f) for f in files) / 1e6:.1f} MB"
    )
    runs: dict[str, dict | None] = {
        "ours auto (no Spark)": run_ours(files, "auto"),
        "ours resiliparse (no Spark)": run_ours(files, "resiliparse"),
        "ours trafilatura (no Spark)": run_ours(files, "trafilatura"),
    }
    if not args.skip_datatrove:
        runs["datatrove trafilatura"] = run_datatrove(files)
    if not args.skip_spark:
        runs[f"ours auto Spark local[{args.cores}]"] = run_spark(files, args.cores)

    print(f"\n{'run':<34}{'read':>6}{'text':>6}{'kept':>6}{'wall s':>8}{'cpu s':>8}{'docs/s/core wall':>18}{'cpu':>8}")
    wall, cpu = {}, {}
    for name, r in runs.items():
        if r is None:
            print(f"{name:<34}  (not run)")
            continue
        wall[name] = r["read"] / r["seconds"] / r.get("cores", 1)
        if "cpu_seconds" in r:
            cpu[name] = r["read"] / r["cpu_seconds"]
        cpu_s = f"{r['cpu_seconds']:.1f}" if "cpu_seconds" in r else "-"
        cpu_rate = f"{cpu[name]:.1f}" if name in cpu else "-"
        print(
            f"{name:<34}{r['read']:>6}{r['extracted']:>6}{r['kept']:>6}{r['seconds']:>8.1f}{cpu_s:>8}{wall[name]:>18.1f}{cpu_rate:>8}"
        )
    base = "datatrove trafilatura"
    if base in wall:
        print("\nratios vs datatrove, docs/s/core (wall-clock; CPU-time where measurable):")
        for name in wall:
            by_cpu = f"{cpu[name] / cpu[base]:>7.2f}x" if name in cpu and base in cpu else "      -"
            print(f"  {name:<34}{wall[name] / wall[base]:>7.2f}x{by_cpu}")
    print("\nextraction quality on trafilatura-eval (200 pages):")
    for engine, s in extraction_quality().items():
        print(
            f"  {engine:<12} with-snippets found {s['with_found']:.3f}   boilerplate absent {s['without_absent']:.3f}"
        )


if __name__ == "__main__":
    main()
