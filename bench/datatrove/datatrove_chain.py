"""datatrove's whole FineWeb chain on local WARC files, each step a LocalPipelineExecutor as in its
examples: cleaning (datatrove_pipeline.py: extraction, language ID, Gopher/C4/FineWeb filters, JSONL),
its four MinHash steps (datatrove_minhash.py: signatures, buckets, cluster, filter) and its tokenizer
step (DocumentTokenizer with a local tokenizer.json). Runs in .venv-datatrove:

    .venv-datatrove/bin/python -m bench.datatrove.datatrove_chain MODEL.ftz TOKENIZER.json OUT_DIR \\
        --workers 2 FILE.warc.gz [...]

Prints one JSON line: documents read, kept after dedup, tokens written, and wall and CPU seconds per
step (CPU of this process and its forked workers: bench/common/proctree.py). Interpreter start-up and
imports are not in any step; they are in "cpu_seconds" (the whole process).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil

from bench.common.proctree import TreeMonitor
from bench.datatrove.datatrove_minhash import minhash_steps, removed_ids, run_steps
from bench.datatrove.datatrove_pipeline import cleaning_pipeline, count_jsonl, documents_read


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("tokenizer")
    parser.add_argument("out")
    parser.add_argument("files", nargs="+")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    monitor = TreeMonitor(os.getpid()).start()
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.tokens import DocumentTokenizer

    shutil.rmtree(args.out, ignore_errors=True)
    cleaned = os.path.join(args.out, "output")
    steps = {"cleaning": (cleaning_pipeline(args.model, args.files, args.out), len(args.files))}
    report = run_steps(steps, args.workers, args.out, monitor)
    shards = len(glob.glob(os.path.join(cleaned, "*.jsonl.gz")))
    dedup = os.path.join(args.out, "minhash")
    report.update(run_steps(minhash_steps(cleaned, dedup, shards), args.workers, dedup, monitor))
    kept = os.path.join(dedup, "kept")
    tokenize = [
        JsonlReader(kept),
        DocumentTokenizer(
            os.path.join(args.out, "tokens"), tokenizer_name_or_path=args.tokenizer, save_filename="tokens"
        ),
    ]
    report.update(run_steps({"tokenize": (tokenize, 1)}, 1, args.out, monitor))
    usage = monitor.stop()
    tokens = sum(os.path.getsize(p) for p in glob.glob(os.path.join(args.out, "tokens", "*.ds"))) // 2
    print(
        json.dumps(
            {
                "read": documents_read(os.path.join(args.out, "logs", "cleaning")),
                "cleaned": count_jsonl(cleaned),
                "removed_minhash": len(removed_ids(dedup)),
                "kept": count_jsonl(kept),
                "tokens": tokens,
                "steps": report,
                **usage,
            }
        )
    )


if __name__ == "__main__":
    main()
