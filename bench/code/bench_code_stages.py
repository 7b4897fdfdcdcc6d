"""CPU time per file of ``code_quality`` and ``code_secrets`` on the labelled real files (tests/data/code_labels.jsonl),
one batch, best of three runs. ``python -m bench.code.bench_code_stages``
"""

from __future__ import annotations

import time

import pyarrow as pa

from bench.code.rules_eval import labelled_files
from dataprep.code.rules import CodeQuality
from dataprep.code.secrets import CodeSecrets


def main() -> None:
    files, _ = labelled_files()
    table = pa.table({"id": [r["path"] for r, _ in files], "text": [t for _, t in files],
                      "path": [r["path"] for r, _ in files], "language": [None] * len(files),
                      "source_kind": ["code"] * len(files)})  # fmt: skip
    mb = sum(len(t.encode()) for _, t in files) / 1e6
    for stage in (CodeQuality(), CodeSecrets()):
        best = float("inf")
        for _ in range(3):
            t0 = time.process_time()
            stage.apply(table)
            best = min(best, time.process_time() - t0)
        print(
            f"{stage.name:13} {len(files)} files, {mb:.1f} MB: {best * 1e3 / len(files):.3f} ms CPU per "
            f"file, {mb / best:.1f} MB/s"
        )


if __name__ == "__main__":
    main()
