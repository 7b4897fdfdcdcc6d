"""datatrove's FineWeb-like cleaning pipeline, as its examples/fineweb.py chains it, on local WARC files:
WarcReader -> Trafilatura(favour_precision) -> LanguageFilter(en, 0.65) -> GopherRepetition ->
GopherQuality -> C4Quality(no terminal-punct filter) -> FineWebQuality -> JsonlWriter, one task per
file, ``--workers`` processes (LocalPipelineExecutor). Runs in .venv-datatrove:

    .venv-datatrove/bin/python -m bench.datatrove.datatrove_pipeline MODEL.ftz OUT_DIR --workers 2 FILE.warc.gz [...]

Prints one JSON line: documents read and written, and the executor's wall seconds (interpreter start-up
and imports excluded, as for our pipeline, whose SparkSession start-up is excluded).
LanguageFilter would download lid.176.bin at run time; we point it at the same model file we use
(the workers are forked, so they inherit the patch).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import time


def cleaning_pipeline(model: str, files: list[str], out: str) -> list:
    """datatrove's FineWeb-like cleaning steps over ``files``, writing JSONL to OUT/output."""
    import datatrove.utils.lid as lid

    lid.cached_asset_path_or_download = lambda *a, **k: model  # no network here
    from datatrove.pipeline.extractors import Trafilatura
    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
        LanguageFilter,
    )
    from datatrove.pipeline.readers import WarcReader
    from datatrove.pipeline.writers import JsonlWriter

    folder = os.path.dirname(os.path.abspath(files[0]))
    names = sorted(os.path.basename(f) for f in files)
    return [
        WarcReader(folder, glob_pattern="*.warc.gz", paths_file=_paths_file(out, names)),
        Trafilatura(favour_precision=True),  # as users run it: 1 s per page, deduplicate=True (its defaults)
        LanguageFilter(languages=["en"], language_threshold=0.65),
        GopherRepetitionFilter(),
        GopherQualityFilter(),
        C4QualityFilter(filter_no_terminal_punct=False),
        FineWebQualityFilter(),
        JsonlWriter(os.path.join(out, "output")),
    ]


def documents_read(logs: str) -> int | None:
    stats = json.load(open(os.path.join(logs, "stats.json")))
    return next((s["stats"].get("documents", {}).get("total", 0) for s in stats if "READER" in s["name"]), None)


def count_jsonl(folder: str) -> int:
    written = 0
    for root, _, files in os.walk(folder):
        for name in files:
            with gzip.open(os.path.join(root, name), "rt") as fh:
                written += sum(1 for _ in fh)
    return written


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("out")
    parser.add_argument("files", nargs="+")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    from datatrove.executor import LocalPipelineExecutor

    shutil.rmtree(args.out, ignore_errors=True)
    executor = LocalPipelineExecutor(
        pipeline=cleaning_pipeline(args.model, args.files, args.out),
        tasks=len(args.files),
        workers=args.workers,
        logging_dir=os.path.join(args.out, "logs"),
        start_method="fork",
    )
    t0 = time.perf_counter()
    executor.run()
    seconds = time.perf_counter() - t0
    written = count_jsonl(os.path.join(args.out, "output"))
    read = documents_read(os.path.join(args.out, "logs"))
    print(json.dumps({"read": read, "written": written, "seconds": seconds, "workers": args.workers}))


def _paths_file(out: str, names: list[str]) -> str:
    """The exact files to read, one per task (a glob would also pick up other files in the folder)."""
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "paths.txt")
    with open(path, "w") as fh:
        fh.write("\n".join(names) + "\n")
    return path


if __name__ == "__main__":
    main()
