"""datatrove's ingestion on WARC files: WarcReader -> Trafilatura -> LanguageFilter (FineWeb's first
steps), chained in one process as its LocalPipelineExecutor does per task. Runs in .venv-datatrove:

    .venv-datatrove/bin/python -m bench.datatrove.datatrove_ingest MODEL.ftz FILE.warc.gz [...]

Prints one JSON line: documents read, kept after extraction, kept after language ID, wall and CPU seconds.
LanguageFilter would download lid.176.bin at run time; we point it at the same model file we use.
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> None:
    model_path, files = sys.argv[1], sys.argv[2:]
    import datatrove.utils.lid as lid

    lid.cached_asset_path_or_download = lambda *args, **kwargs: model_path  # no network here
    from datatrove.pipeline.extractors import Trafilatura
    from datatrove.pipeline.filters import LanguageFilter
    from datatrove.pipeline.readers import WarcReader

    counts = {"read": 0, "extracted": 0}

    def count(name, docs):
        for doc in docs:
            counts[name] += 1
            yield doc

    t0, cpu0 = time.perf_counter(), _cpu_seconds()
    kept = 0
    for path in files:
        folder, name = os.path.split(os.path.abspath(path))
        docs = count("read", WarcReader(folder).read_file(name))
        docs = count("extracted", Trafilatura(favour_precision=True).run(docs))
        kept += sum(1 for _ in LanguageFilter(language_threshold=0.65).run(docs))
    seconds, cpu = time.perf_counter() - t0, _cpu_seconds() - cpu0
    print(json.dumps({**counts, "kept": kept, "seconds": seconds, "cpu_seconds": cpu}))


def _cpu_seconds() -> float:
    """User+system CPU of this process and its finished children (Trafilatura's sandbox process)."""
    import resource

    return sum(
        usage.ru_utime + usage.ru_stime
        for usage in (resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN))
    )


if __name__ == "__main__":
    main()
