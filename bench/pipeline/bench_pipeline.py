"""The whole cleaning pipeline, ours on Spark local[N] against datatrove's FineWeb-like pipeline with N
workers, on the same WARC input, side by side in one run:

    WARC -> extraction -> language ID (en, 0.65) -> Gopher repetition -> Gopher quality -> C4 -> FineWeb -> writer

    python -m bench.pipeline.bench_pipeline [--pages 2000] [--files 8] [--cores 2] [--rounds 3] [--json PATH]

Input: copies of the 200 real trafilatura-eval pages as gzipped WARC response records (make_bench_warc.py).
Each engine runs in its own process per round; rounds alternate (datatrove, ours, datatrove, ...) and
medians are reported, because timings on a shared machine drift. Figures per engine:
  - docs/s/core = documents read / wall seconds / cores. Ours is timed from the job's start to the
    cleaned corpus on disk, with the SparkSession already up; datatrove from executor.run() start to
    end (interpreter start-up and imports excluded). "cold" is the first job in a fresh session (Python
    workers start, import, load models; the JVM compiles hot code); "warm" is a second job in the same
    session, the steady state of a long job over many files.
  - CPU ms/doc: CPU seconds of the whole process tree (JVM + Python workers; datatrove's workers and
    Trafilatura sandbox) per document, robust to other load on the machine. Our "cold" CPU includes
    the session's start (JVM, Python daemon), as a user's first run pays it; datatrove's includes its
    interpreter start-up and imports.
Projected core-hours for a 3-billion-page snapshot = 3e9 / (docs/s/core) / 3600.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common.paths import ROOT
from bench.datatrove.environment import datatrove_python

SNAPSHOT_PAGES = 3e9
OUR_STAGES = [
    {"stage": "extract"},
    {"stage": "langid", "languages": ["en"], "threshold": 0.65},
    {"include": str(ROOT / "configs" / "pipeline" / "fineweb_filters.yaml")},
]


def chain_stages(tokenizer: str) -> list[dict]:
    """The whole chain after cleaning: exact and MinHash dedup, then token shards."""
    return [{"stage": "exact_dedup"}, {"stage": "minhash_dedup"}, {"stage": "tokenize", "tokenizer": tokenizer}]


def run_child(files: list[str], out: str, cores: int, jobs: int, tokenizer: str | None = None) -> None:
    """In a fresh process: start Spark, run the pipeline ``jobs`` times; print one JSON line. The first
    job's CPU includes the session's start (the JVM), as a user's first run pays it; each job's
    ``steps`` holds wall and CPU seconds per Spark step (``corpus`` is the final rewrite)."""
    from bench.common.proctree import TreeMonitor

    monitor = TreeMonitor().start()
    from dataprep.core.config import load_config
    from pipelines.pipeline_run import PipelineRun
    from pipelines.spark import get_spark

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    t0 = time.perf_counter()
    spark = get_spark(f"local[{cores}]", app_name="bench-pipeline")
    session_seconds = time.perf_counter() - t0
    session_cpu = sum(monitor.cpu_by_kind().values())

    class TimedRun(PipelineRun):
        """Each step (and the corpus rewrite) timed by wall and process-tree CPU, in ``laps``."""

        def _lap(self, name, fn, *args):
            cpu0, t0 = monitor.cpu_by_kind(), time.perf_counter()
            out = fn(*args)
            cpu1 = monitor.cpu_by_kind()
            self.laps[name] = {
                "seconds": round(time.perf_counter() - t0, 2),
                **{f"cpu_{k}": round(cpu1[k] - cpu0[k], 2) for k in cpu1},
            }
            return out

        def _run_step(self, step, *args):
            return self._lap(step.name, super()._run_step, step, *args)

        def _write_corpus(self, *args):
            return self._lap("corpus", super()._write_corpus, *args)

    stages = OUR_STAGES + (chain_stages(tokenizer) if tokenizer else [])
    config = load_config({"input": {"paths": files}, "output": {"dir": out}, "stages": stages})
    runs = []
    for job in range(jobs):
        if job:
            monitor = TreeMonitor().start()
        run = TimedRun(config, spark=spark, force=True)
        run.laps = {}
        t0 = time.perf_counter()
        result = run.run()
        seconds = time.perf_counter() - t0
        usage = monitor.stop()
        stats = {s.stage: s for s in result.stats}
        written = stats["fineweb_quality"].docs_kept
        runs.append(
            {
                "read": stats["read"].docs_in,
                "written": written,
                "kept": result.stats[-1].docs_kept,
                "seconds": seconds,
                **usage,
                "steps": run.laps,
            }
        )
    spark.stop()
    print(json.dumps({"session_seconds": session_seconds, "session_cpu_seconds": session_cpu, "runs": runs}))


def _last_json(proc: subprocess.CompletedProcess) -> dict | None:
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr)
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_ours(files: list[str], work: str, cores: int, tokenizer: str | None = None) -> dict | None:
    """Our pipeline in a fresh process, twice: "cold" (the first job, paying the session's start) and
    "warm" (the second job in the same session: the steady state of a long job)."""
    cmd = [
        sys.executable,
        "-m",
        "bench.pipeline.bench_pipeline",
        "--child",
        "--cores",
        str(cores),
        "--out",
        os.path.join(work, "ours"),
        *files,
    ]
    result = _last_json(
        subprocess.run(cmd + (["--tokenizer", tokenizer] if tokenizer else []), capture_output=True, text=True)
    )
    if result is None:
        return None
    cold, warm = result["runs"][0], result["runs"][-1]
    return {
        "cold": cold,
        "warm": warm,
        "session_seconds": result["session_seconds"],
        "session_cpu_seconds": result["session_cpu_seconds"],
    }


def run_datatrove(files: list[str], work: str, cores: int) -> dict | None:
    from bench.common.proctree import TreeMonitor
    from dataprep.classify.langid import default_model_path

    cmd = [
        datatrove_python(),
        "-m",
        "bench.datatrove.datatrove_pipeline",
        default_model_path(),
        os.path.join(work, "datatrove"),
        "--workers",
        str(cores),
        *files,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    monitor = TreeMonitor(proc.pid).start()
    stdout, stderr = proc.communicate()
    usage = monitor.stop()
    result = _last_json(subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr))
    return None if result is None else {**result, **usage}


def rates(run: dict, cores: int) -> dict:
    return {
        "docs_per_s_per_core": run["read"] / run["seconds"] / cores,
        "cpu_ms_per_doc": 1000 * run["cpu_seconds"] / run["read"],
    }


def median_rates(runs: list[dict], cores: int) -> dict:
    per_run = [rates(r, cores) for r in runs]
    return {key: statistics.median(r[key] for r in per_run) for key in per_run[0]} if per_run else {}


def main() -> None:
    parser = argparse.ArgumentParser(description="whole pipeline: ours on Spark vs datatrove, docs/s per core")
    parser.add_argument("files", nargs="*", help=argparse.SUPPRESS)
    parser.add_argument("--pages", type=int, default=2000, help="input pages (copies of the 200 eval pages)")
    parser.add_argument(
        "--files", dest="n_files", type=int, default=8, help="WARC files (= tasks) the pages are split into"
    )
    parser.add_argument("--cores", type=int, default=2, help="Spark local[N] and datatrove workers")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "ccpretrain-bench", "pipeline"))
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--tokenizer", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return run_child(args.files, args.out, args.cores, jobs=2, tokenizer=args.tokenizer)

    from bench.common.make_bench_warc import write_bench_warcs

    copies = max(1, args.pages // 200)  # the input is whole copies of the 200 eval pages
    files = write_bench_warcs(os.path.join(args.work, "warc"), repeat=copies, files=args.n_files)
    print(f"input: {len(files)} WARC files, {copies * 200} pages; {args.cores} cores; {args.rounds} rounds", flush=True)
    dt_runs, cold_runs, warm_runs = [], [], []
    for r in range(args.rounds):
        dt = run_datatrove(files, args.work, args.cores)
        ours = run_ours(files, args.work, args.cores)
        if dt:
            dt_runs.append(dt)
        if ours:
            cold_runs.append(ours["cold"])
            warm_runs.append(ours["warm"])
        show = lambda x, k: f"{x[k]:.1f}s" if x else "failed"  # noqa: E731
        print(
            f"  round {r + 1}: datatrove {show(dt, 'seconds')}, ours cold "
            f"{show(ours and ours['cold'], 'seconds')}, warm {show(ours and ours['warm'], 'seconds')}",
            flush=True,
        )

    table = {
        "datatrove": median_rates(dt_runs, args.cores),
        "ours cold": median_rates(cold_runs, args.cores),
        "ours warm": median_rates(warm_runs, args.cores),
    }
    written = {
        "datatrove": dt_runs and dt_runs[0]["written"],
        "ours cold": cold_runs and cold_runs[0]["written"],
        "ours warm": warm_runs and warm_runs[0]["written"],
    }
    print(f"\n{'engine':<12}{'docs/s/core':>13}{'CPU ms/doc':>12}{'written':>9}{'core-h per 3B pages':>21}")
    for name, figures in table.items():
        if figures:
            hours = SNAPSHOT_PAGES / figures["docs_per_s_per_core"] / 3600
            print(
                f"{name:<12}{figures['docs_per_s_per_core']:>13.1f}{figures['cpu_ms_per_doc']:>12.1f}{written[name]:>9}{hours:>21,.0f}"
            )
    summary = {"pages": copies * 200, "cores": args.cores, "rounds": args.rounds, "engines": table, "written": written}
    base = table["datatrove"]
    if base:
        print("\nours / datatrove, docs/s per core (wall)   and by CPU time:")
        for name in ("ours cold", "ours warm"):
            if table[name]:
                wall = table[name]["docs_per_s_per_core"] / base["docs_per_s_per_core"]
                cpu = base["cpu_ms_per_doc"] / table[name]["cpu_ms_per_doc"]
                summary[f"ratio {name}"] = {"wall": wall, "cpu": cpu}
                print(f"  {name:<10}{wall:>8.2f}x{cpu:>10.2f}x")
        summary["core_hours_per_snapshot"] = {
            name: SNAPSHOT_PAGES / f["docs_per_s_per_core"] / 3600 for name, f in table.items() if f
        }
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
