"""datatrove's MinHash dedup (FineWeb settings: 5-grams, 14 buckets x 8 hashes) on a folder of JSONL
files: signatures -> buckets -> clusters -> filter, each a LocalPipelineExecutor as in its examples.
Runs in .venv-datatrove:

    .venv-datatrove/bin/python -m bench.datatrove.datatrove_minhash INPUT_DIR WORK_DIR WORKERS

Prints one JSON line: wall and CPU seconds per step and in total, peak memory, and writes the ids it
removed to WORK_DIR/removed_ids.txt.
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import sys
import time

from bench.common.proctree import TreeMonitor


def minhash_steps(input_dir: str, work: str, files: int) -> dict:
    """name -> (pipeline, tasks) of datatrove's four MinHash steps over the JSONL files in input_dir;
    kept documents go to WORK/kept, removed ones to WORK/removed."""
    from datatrove.pipeline.dedup import (
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter

    config = MinhashConfig(n_grams=5, num_buckets=14, hashes_per_bucket=8)
    return {
        "minhash signatures": ([JsonlReader(input_dir), MinhashDedupSignature(f"{work}/sigs", config=config)], files),
        "minhash buckets": (
            [MinhashDedupBuckets(f"{work}/sigs", f"{work}/buckets", config=config)],
            config.num_buckets,
        ),
        "minhash cluster": ([MinhashDedupCluster(f"{work}/buckets", f"{work}/remove_ids", config=config)], 1),
        "minhash filter": (
            [
                JsonlReader(input_dir),
                MinhashDedupFilter(f"{work}/remove_ids", exclusion_writer=JsonlWriter(f"{work}/removed")),
                JsonlWriter(f"{work}/kept"),
            ],
            files,
        ),
    }


def run_steps(steps: dict, workers: int, work: str, monitor: TreeMonitor) -> dict:
    """Run each step as its own LocalPipelineExecutor, as datatrove's examples do; wall and CPU
    seconds of each (CPU of this process and its workers, read from ``monitor``)."""
    from datatrove.executor import LocalPipelineExecutor

    report = {}
    for name, (pipeline, tasks) in steps.items():
        t0, cpu0 = time.perf_counter(), sum(monitor.cpu_by_kind().values())
        logs = f"{work}/logs/{name.replace(' ', '_')}"
        LocalPipelineExecutor(
            pipeline=pipeline, tasks=tasks, workers=min(workers, tasks), logging_dir=logs, start_method="fork"
        ).run()
        report[name] = {
            "seconds": round(time.perf_counter() - t0, 2),
            "cpu_seconds": round(sum(monitor.cpu_by_kind().values()) - cpu0, 2),
        }
    return report


def removed_ids(work: str) -> list[str]:
    removed = []
    for path in sorted(glob.glob(f"{work}/removed/*.jsonl.gz")):
        with gzip.open(path, "rt") as fh:
            removed.extend(json.loads(line)["id"] for line in fh)
    return removed


def main() -> None:
    input_dir, work, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
    monitor = TreeMonitor().start()
    files = len(glob.glob(os.path.join(input_dir, "*.jsonl")))
    steps = run_steps(minhash_steps(input_dir, work, files), workers, work, monitor)
    report = {f"{name.split()[-1]}_seconds": step["seconds"] for name, step in steps.items()}
    report.update(monitor.stop())
    report["seconds"] = round(sum(step["seconds"] for step in steps.values()), 1)
    removed = removed_ids(work)
    with open(f"{work}/removed_ids.txt", "w") as fh:
        fh.write("\n".join(removed))
    report["removed"] = len(removed)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
