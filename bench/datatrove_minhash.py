"""datatrove's MinHash dedup (FineWeb settings: 5-grams, 14 buckets x 8 hashes) on a folder of JSONL
files: signatures -> buckets -> clusters -> filter, each a LocalPipelineExecutor as in its examples.
Runs in .venv-datatrove:

    .venv-datatrove/bin/python bench/datatrove_minhash.py INPUT_DIR WORK_DIR WORKERS

Prints one JSON line: wall and CPU seconds per step and in total, peak memory, and writes the ids it
removed to WORK_DIR/removed_ids.txt.
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from datatrove_steps import run_steps  # noqa: E402


def main() -> None:
    input_dir, work, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
    from datatrove.pipeline.dedup import MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupFilter, MinhashDedupSignature
    from datatrove.pipeline.dedup.minhash import MinhashConfig
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter

    config = MinhashConfig(n_grams=5, num_buckets=14, hashes_per_bucket=8)
    files = len(glob.glob(os.path.join(input_dir, "*.jsonl")))
    steps = {
        "signatures": ([JsonlReader(input_dir), MinhashDedupSignature(f"{work}/sigs", config=config)], files),
        "buckets": ([MinhashDedupBuckets(f"{work}/sigs", f"{work}/buckets", config=config)], config.num_buckets),
        "cluster": ([MinhashDedupCluster(f"{work}/buckets", f"{work}/remove_ids", config=config)], 1),
        "filter": (
            [
                JsonlReader(input_dir),
                MinhashDedupFilter(f"{work}/remove_ids", exclusion_writer=JsonlWriter(f"{work}/removed")),
                JsonlWriter(f"{work}/kept"),
            ],
            files,
        ),
    }
    report = run_steps(steps, work, workers)
    removed = []
    for path in sorted(glob.glob(f"{work}/removed/*.jsonl.gz")):
        with gzip.open(path, "rt") as fh:
            removed.extend(json.loads(line)["id"] for line in fh)
    with open(f"{work}/removed_ids.txt", "w") as fh:
        fh.write("\n".join(removed))
    report["removed"] = len(removed)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
