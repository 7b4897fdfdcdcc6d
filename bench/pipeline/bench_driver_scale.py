"""What the driver costs per listing entry: a CC-like ``warc.paths.gz`` of 1,000 / 10,000 / 90,000 tiny
WARC files, each measured in a fresh process.

    python -m bench.pipeline.bench_driver_scale [--sizes 1000 10000 90000] [--full 1000] [--json PATH]

Input: tiny gzipped WARC files (a request and a response record each, the response a short page made
from a real document in ../shared/data), written once under ``--work``, and one listing per size. Per
size, in a child process (``--child``): the driver's CPU seconds and its Python heap growth for listing
expansion, task planning and the config fingerprint; the pickled task function every task deserialises
(the task list travels as a broadcast, once per executor; the bench also times what unpickling it in
every task would cost); merging one stats file per task into stats.json and printing the funnel (the stats files are a
real task's, copied once per task); and the time to the first finished task of the real first step (a run on Spark
``local[2]`` with one task per file, as for a listing on an object store, cancelled once a task has finished). Sizes
listed in ``--full`` also run the whole first step to the end (driver CPU, JVM and Python workers' CPU and peak memory)
and write its report (``dataprep report``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.common.paths import SHARED

STAGES = [{"stage": "extract"}]


def _page_texts() -> list[str]:
    texts = []
    for path in sorted((SHARED / "documents").iterdir()):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as fh:
            raw = fh.read()
        docs = (
            json.loads(raw)
            if raw.lstrip().startswith("[")
            else [json.loads(line) for line in raw.splitlines() if line.strip()]
        )
        texts += [d["text"] for d in docs if d.get("text")]
    return texts


def write_tiny_warcs(work: Path, count: int) -> list[str]:
    """``count`` tiny WARC files (written once; kept between runs), each a request and a response."""
    from bench.common.make_bench_warc import warc_response
    from dataprep.readers.warc_writer import warc_record

    folder = work / "warc"
    folder.mkdir(parents=True, exist_ok=True)
    paths = [str(folder / f"CC-TINY-{i:06d}.warc.gz") for i in range(count)]
    texts = _page_texts()
    for i, path in enumerate(paths):
        if os.path.exists(path):
            continue
        text = texts[i % len(texts)][:600].replace("<", " ")
        html = (
            f"<html><head><title>page {i}</title></head><body><article><h1>Page "
            f"{i}</h1><p>{text}</p></article></body></html>".encode()
        )
        url = f"http://tiny{i % 997}.example/page/{i}"
        request = warc_record("request", {"WARC-Target-URI": url}, b"")
        with open(path + ".tmp", "wb") as fh:
            fh.write(gzip.compress(request) + warc_response(url, html))
        os.replace(path + ".tmp", path)
    return paths


def write_listing(work: Path, paths: list[str]) -> str:
    listing = work / f"warc-{len(paths)}.paths.gz"
    if not listing.exists():
        with gzip.open(listing, "wt") as fh:
            fh.writelines(p + "\n" for p in paths)
    return str(listing)


def _rss_kb(field: str = "VmRSS") -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(field))


def _phase(figures: dict, name: str, fn):
    import tracemalloc

    tracemalloc.start()
    cpu0 = time.process_time()
    result = fn()
    figures[name] = {
        "cpu_s": round(time.process_time() - cpu0, 3),
        "heap_peak_mb": round(tracemalloc.get_traced_memory()[1] / 2**20, 1),
    }
    tracemalloc.stop()
    return result


def child(listing: str, work: str, full: bool) -> dict:
    """One size in this process: the driver's phases, then the real first step (cancelled or whole)."""
    import pickle

    from pyspark import cloudpickle

    from dataprep.core.config import load_config
    from dataprep.core.inputs import expand_inputs
    from dataprep.core.stats import format_table, save_json
    from dataprep.readers import READ_SCHEMA
    from pipelines import steps
    from pipelines.pipeline_run import PipelineRun
    from pipelines.spark import get_spark
    from pipelines.tasks import STATS_DIR, fingerprint_of, merged_stats

    figures: dict = {}
    files = _phase(figures, "listing", lambda: expand_inputs([listing]))
    figures["files"] = len(files)
    steps.TASK_BYTES = 0  # one task per file, as a listing on an object store gets
    groups = _phase(figures, "plan_tasks", lambda: steps.file_tasks(files, 2))
    config = load_config(
        {
            "input": {"paths": [listing]},
            "output": {"dir": os.path.join(work, "out")},
            "stages": STAGES,
            "spark": {"master": "local[2]"},
        }
    )
    _phase(
        figures, "fingerprint", lambda: fingerprint_of({"files": files, "input": config.input.model_dump(mode="json")})
    )
    from bench.common.proctree import TreeMonitor

    monitor = TreeMonitor().start()
    spark = get_spark("local[2]", "bench-driver-scale")
    run = PipelineRun(config, spark=spark, force=True)
    step = run.steps[0]
    # what every task deserialises: the task function with the task list, as the first step ships it
    fn = steps.make_partition_fn(
        step,
        step.stages,
        config.input,
        None,
        READ_SCHEMA,
        None,
        False,
        work,
        "fingerprint",
        spark.sparkContext.broadcast(groups),
        "zstd",
    )
    blob = cloudpickle.dumps(fn)
    t0 = time.process_time()
    for _ in range(5):
        pickle.loads(cloudpickle.dumps(groups))  # the task list's share, had it travelled inside the function
    figures["task_function"] = {
        "pickled_kb": round(len(blob) / 1024),
        "task_list_kb": round(len(cloudpickle.dumps(groups)) / 1024),
        "task_list_unpickle_ms": round((time.process_time() - t0) / 5 * 1000, 2),
    }
    stats_dir = os.path.join(work, "out", "steps", step.name, STATS_DIR)
    first: dict = {}

    def watch(t0: float) -> None:
        while not first.get("stop"):
            if os.path.isdir(stats_dir) and any(n.endswith(".json") for n in os.listdir(stats_dir)):
                first["seconds"] = round(time.perf_counter() - t0, 2)
                if not full:
                    spark.sparkContext.cancelAllJobs()
                return
            time.sleep(0.05)

    shutil.rmtree(os.path.join(work, "out"), ignore_errors=True)
    cpu0, t0 = time.process_time(), time.perf_counter()
    watcher = threading.Thread(target=watch, args=(t0,), daemon=True)
    watcher.start()
    try:
        run.run()
        figures["run_seconds"] = round(time.perf_counter() - t0, 1)
    except Exception as exc:  # the cancelled job
        if full:
            raise
        figures["cancelled"] = type(exc).__name__
    first["stop"] = True
    if full:  # the report over a run with one Parquet file per input file in its first step
        from dataprep.report.build import build_report

        _phase(figures, "report", lambda: build_report(os.path.join(work, "out")))
    figures["first_task_seconds"] = first.get("seconds")
    figures["driver_python_cpu_s"] = round(time.process_time() - cpu0, 2)
    figures["tree"] = monitor.stop()
    figures["driver_python_peak_rss_mb"] = round(_rss_kb("VmHWM") / 1024)

    # stats merge and report over one stats file per task, copied from a real task's
    sample = next((os.path.join(stats_dir, n) for n in sorted(os.listdir(stats_dir)) if n.endswith(".json")), None)
    if sample:
        text = Path(sample).read_text()
        merge_dir = Path(work) / "merge" / "steps" / "x"
        shutil.rmtree(merge_dir.parent.parent, ignore_errors=True)
        (merge_dir / STATS_DIR).mkdir(parents=True)
        for i in range(len(files)):
            (merge_dir / STATS_DIR / f"part-{i:05d}.json").write_text(text)
        merged = _phase(figures, "stats_merge", lambda: merged_stats(spark, str(merge_dir), [])[0])
        _phase(
            figures,
            "stats_save_and_table",
            lambda: (save_json(merged, str(merge_dir / "stats.json")), format_table(merged)),
        )
        figures["stats_docs_in"] = merged[0].docs_in
    spark.stop()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 90000])
    parser.add_argument(
        "--full", type=int, nargs="*", default=[1000], help="sizes whose first step also runs to the end"
    )
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "ccpretrain-bench", "driver-scale"))
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-full", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.work, args.child_full)))
        return
    work = Path(args.work)
    t0 = time.perf_counter()
    paths = write_tiny_warcs(work, max(args.sizes))
    print(f"{len(paths)} tiny WARC files under {work / 'warc'} ({time.perf_counter() - t0:.0f}s)", flush=True)
    results = {}
    for size in args.sizes:
        listing = write_listing(work, paths[:size])
        cmd = [
            sys.executable,
            "-m",
            "bench.pipeline.bench_driver_scale",
            "--child",
            listing,
            "--work",
            str(work / f"run-{size}"),
        ]
        proc = subprocess.run(cmd + (["--child-full"] if size in args.full else []), capture_output=True, text=True)
        if proc.returncode:
            print(proc.stderr[-3000:], file=sys.stderr)
            continue
        results[size] = r = json.loads(proc.stdout.strip().splitlines()[-1])
        per = lambda key: 1e6 * r[key]["cpu_s"] / size  # noqa: E731  (CPU microseconds per listing entry)
        print(
            f"\n[{size} files] listing {r['listing']['cpu_s']}s ({per('listing'):.0f} us/file, heap "
            f"{r['listing']['heap_peak_mb']} MB), "
            f"plan {r['plan_tasks']['cpu_s']}s, fingerprint {r['fingerprint']['cpu_s']}s",
            flush=True,
        )
        print(
            f"  task function {r['task_function']['pickled_kb']} KB (the task list "
            f"{r['task_function']['task_list_kb']} KB, "
            f"{r['task_function']['task_list_unpickle_ms']} ms to unpickle); "
            f"first task done after {r['first_task_seconds']}s",
            flush=True,
        )
        print(
            f"  stats merge {r.get('stats_merge', {}).get('cpu_s')}s (heap "
            f"{r.get('stats_merge', {}).get('heap_peak_mb')} MB), "
            f"save + table {r.get('stats_save_and_table', {}).get('cpu_s')}s; driver Python CPU "
            f"{r['driver_python_cpu_s']}s, "
            f"peak RSS {r['driver_python_peak_rss_mb']} MB; JVM peak {r['tree']['peak_rss_mb_jvm']} MB"
            + (
                f"; whole first step {r['run_seconds']}s wall, tree CPU {r['tree']['cpu_seconds']}s, report "
                f"{r['report']['cpu_s']}s CPU"
                if "run_seconds" in r
                else ""
            ),
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
