"""The CPU of ``dataprep filter`` against a full run of the same preset, on every WARC in ../shared/data.

    python -m bench.pipeline.bench_signals [--preset fineweb] [--work /tmp/ccpretrain-bench/signals] [--json PATH]

Three commands, each in a fresh process on Spark ``local[2]``, one after the other: ``dataprep run PRESET``
(the full run), ``dataprep run PRESET --signals`` and ``dataprep filter`` over those signals. Per command:
the CPU seconds of the whole process tree (driver, JVM, Python workers, polled in /proc), the stages'
own CPU from its stats.json (tasks' stage code and whole-corpus steps' executors), the wall time and the
load average before and after (CPU is what to compare on a shared machine). Then checks that the filter's
corpus is the full run's. A 500-token tokenizer keeps the tokenize step's training small.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from bench.common.paths import SHARED


def _processes() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds of its own) of every process (Linux /proc)."""
    tick, out = os.sysconf("SC_CLK_TCK"), {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            out[int(entry)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
    return out


def _run_tree(command: list[str]) -> float:
    """Run ``command``; the CPU seconds of it and every process below it (the JVM Spark starts is not
    reaped by the driver, so ``RUSAGE_CHILDREN`` would miss it), polled until it ends."""
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    seen: dict[int, float] = {}
    while proc.poll() is None:
        table = _processes()
        tree, frontier = {proc.pid}, [proc.pid]
        while frontier:
            parent = frontier.pop()
            children = [pid for pid, (ppid, _) in table.items() if ppid == parent and pid not in tree]
            tree.update(children)
            frontier += children
        for pid in tree & set(table):
            seen[pid] = max(seen.get(pid, 0.0), table[pid][1])
        time.sleep(0.2)
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, command)
    return sum(seen.values())


def _measure(label: str, args: list[str], out: Path) -> dict:
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    cpu = _run_tree([sys.executable, "-m", "pipelines.cli", *args, "--master", "local[2]"])
    wall = time.perf_counter() - t0
    stats = json.loads((out / "stats.json").read_text())["stages"]
    document_cpu = sum(s.get("cpu_seconds", 0) for s in stats)  # document stages' own code in the tasks
    corpus_cpu = sum(s.get("executor_cpu_seconds", 0) for s in stats)  # whole-corpus steps on the executors
    row = {
        "command": label,
        "process_cpu_seconds": round(cpu, 1),
        "stage_cpu_seconds": round(document_cpu + corpus_cpu, 2),
        "document_stage_cpu_seconds": round(document_cpu, 2),
        "whole_corpus_cpu_seconds": round(corpus_cpu, 2),
        "wall_seconds": round(wall, 1),
        "load_before": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="fineweb")
    parser.add_argument("--work", default="/tmp/ccpretrain-bench/signals")
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    warcs = sorted(str(p) for p in (SHARED / "warc").glob("*/*") if p.is_file())
    sets = ["--set", "stages.-1.train.vocab_size=500"] if args.preset != "dclm" else []
    run = ["run", args.preset, "--input", *warcs, *sets]
    rows = [
        _measure("run", [*run, "--output", str(work / "full")], work / "full"),
        _measure("run --signals", [*run, "--output", str(work / "signals"), "--signals"], work / "signals"),
        _measure(
            "filter",
            ["filter", str(work / "signals"), "--config", args.preset, "--output", str(work / "filtered"), *sets],
            work / "filtered",
        ),
    ]
    same = sorted(pq.read_table(work / "full" / "corpus").column("id").to_pylist()) == sorted(
        pq.read_table(work / "filtered" / "corpus").column("id").to_pylist()
    )
    result = {
        "preset": args.preset,
        "input_files": len(warcs),
        "same_corpus": same,
        "runs": rows,
        "filter_over_full_process_cpu": round(rows[2]["process_cpu_seconds"] / rows[0]["process_cpu_seconds"], 3),
        "filter_over_full_stage_cpu": round(rows[2]["stage_cpu_seconds"] / max(rows[0]["stage_cpu_seconds"], 1e-9), 3),
        "filter_over_full_document_stage_cpu": round(
            rows[2]["document_stage_cpu_seconds"] / max(rows[0]["document_stage_cpu_seconds"], 1e-9), 3
        ),
    }
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
