"""The ``code`` preset on the Python standard library (this interpreter's; not shipped): the reader alone in
one process, then the whole preset on Spark (reader, licence and language policy, exact and MinHash dedup,
tokenizer training and shards), each as files per second per core by CPU time (the Spark run's CPU is the
whole process tree: driver, JVM, Python workers).

    python -m bench.readers.bench_code [--cores 2] [--vocab 32000]
"""

from __future__ import annotations

import argparse
import os
import sysconfig
import tempfile
import time
from pathlib import Path

from bench.common.proctree import TreeMonitor
from dataprep.core.config import InputConfig, load_config
from dataprep.core.stats import StageStats
from dataprep.readers import iter_documents
from pipelines.pipeline_run import run_pipeline
from pipelines.spark import get_spark


def stdlib_inputs() -> list[str]:
    """Each top-level package and module of the standard library, one input each (its site-packages out)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    return [str(p) for p in sorted(root.iterdir()) if p.name not in ("site-packages", "__pycache__")]


def read_only(inputs: list[str]) -> tuple[int, int, float]:
    """Files read, files kept and CPU seconds of the reader alone, in this process."""
    stats, cpu = StageStats("read"), time.process_time()
    for path in inputs:
        for _ in iter_documents(path, InputConfig(format="code", max_document_bytes=1_000_000), stats):
            pass
    return stats.docs_in, stats.docs_kept, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=32000, help="tokenizer size (the preset's: 32000)")
    args = parser.parse_args()
    inputs = stdlib_inputs()
    files, kept, cpu = read_only(inputs)
    lines = [
        f"reader alone: {files} files ({kept} kept as text) in {cpu:.1f} CPU s: {files / cpu:,.0f} files/s per core"
    ]
    spark = get_spark(f"local[{args.cores}]", app_name="bench-code")
    with tempfile.TemporaryDirectory() as tmp:
        config = load_config(
            "code", overrides={"input": {"paths": inputs}, "output": {"dir": os.path.join(tmp, "out")}}
        )
        config.stages[-1].train.vocab_size = args.vocab
        monitor, wall = TreeMonitor().start(), time.perf_counter()
        result = run_pipeline(config, spark=spark)
        cpu, wall = monitor.stop()["cpu_seconds"], time.perf_counter() - wall
    spark.stop()
    read = next(s for s in result.stats if s.stage == "read")
    for s in result.stats:
        lines.append(
            f"  {s.stage:<14}{s.docs_in:>7} in {s.docs_kept:>7} kept  {s.cpu_seconds:>6.1f} CPU s (in its tasks)"
        )
    lines.append(
        f"code preset on Spark local[{args.cores}]: {len(inputs)} inputs, {read.docs_in} files read, "
        f"{result.stats[-1].docs_kept} in the corpus; {cpu:.1f} CPU s (process tree), {wall:.1f} s wall: "
        f"{read.docs_in / cpu:,.1f} files/s per core"
    )
    print("\n".join(lines))  # after the run's own progress lines


if __name__ == "__main__":
    main()
