"""datatrove's sentence dedup (C4's 3-sentence spans, first copy kept) on a folder of JSONL files:
signatures -> find duplicates (one task, as its example) -> filter, each a LocalPipelineExecutor.
Documents are dropped only when nothing is left (min_doc_words and min_num_sentences 0), as our
``paragraph_dedup`` with ``min_remaining_chars`` 1 does. Runs in datatrove's own venv:

    /work/venv-datatrove/bin/python -m bench.datatrove.datatrove_sentence_dedup INPUT_DIR WORK_DIR WORKERS

Prints one JSON line: wall seconds per step and in total, CPU seconds and peak memory of the process
tree; the kept documents are under WORK_DIR/kept (JSONL, gzip).
"""

from __future__ import annotations

import glob
import json
import os
import sys

from bench.datatrove.datatrove_steps import run_steps


def main() -> None:
    input_dir, work, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
    from datatrove.pipeline.dedup.sentence_dedup import (
        SentDedupConfig,
        SentenceDedupFilter,
        SentenceDedupSignature,
        SentenceFindDedups,
    )
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter

    config = SentDedupConfig(n_sentences=3, min_doc_words=0, min_num_sentences=0)
    files = len(glob.glob(os.path.join(input_dir, "*.jsonl")))
    steps = {
        "signatures": ([JsonlReader(input_dir), SentenceDedupSignature(f"{work}/sigs", config=config)], files),
        "find": ([SentenceFindDedups(f"{work}/sigs", f"{work}/dups", config=config)], 1),
        "filter": (
            [JsonlReader(input_dir), SentenceDedupFilter(f"{work}/dups", config=config), JsonlWriter(f"{work}/kept")],
            files,
        ),
    }
    report = run_steps(steps, work, workers)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
