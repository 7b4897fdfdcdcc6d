"""Throughput of the heuristic quality stages against datatrove's filters on the same documents, and
of perplexity scoring. One process each (documents/s per core); ratios are ours / datatrove's.

    python -m bench.quality.bench_quality [--repeat 3]      # needs ../shared/data and .venv-datatrove

Texts: the parity set (shared documents, WARC main text, trafilatura-eval pages: 291 texts, 1.9 MB).
"Cold" clears our word caches before each stage; "chain" runs FineWeb's order on one batch, the way
a pipeline partition does (survivors of one stage go to the next).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from bench.common.paths import SHARED
from bench.datatrove.environment import datatrove_python
from tests.support.quality_parity import build_texts

DATATROVE_SIDE = r"""
import json, sys, time, warnings
warnings.filterwarnings("ignore")
from datatrove.data import Document
from datatrove.pipeline.filters import (C4QualityFilter, FineWebQualityFilter, GopherQualityFilter,
                                        GopherRepetitionFilter)
from datatrove.utils.text import split_into_words
texts = json.load(open(sys.argv[1]))
split_into_words("warm up the tokenizer")
stages = {"gopher_repetition": GopherRepetitionFilter(), "gopher_quality": GopherQualityFilter(),
          "c4_quality": C4QualityFilter(filter_no_terminal_punct=False), "fineweb_quality": FineWebQualityFilter()}
def run(f, docs):
    out = []
    for d in docs:
        try:
            if f.filter(d) is True: out.append(d)
        except Exception: pass
    return out
result = {}
for name, f in stages.items():
    docs = [Document(text=t, id=str(i)) for i, t in enumerate(texts)]
    t0 = time.perf_counter(); run(f, docs); result[name] = time.perf_counter() - t0
docs = [Document(text=t, id=str(i)) for i, t in enumerate(texts)]
t0 = time.perf_counter()
for f in stages.values(): docs = run(f, docs)
result["chain"] = time.perf_counter() - t0
print(json.dumps(result))
"""


def ours(texts: list[str]) -> dict[str, float]:
    import pyarrow as pa

    from dataprep.quality import languages, spacy_words
    from dataprep.quality.c4 import C4Quality
    from dataprep.quality.fineweb import FineWebQuality
    from dataprep.quality.gopher import GopherQuality
    from dataprep.quality.gopher_repetition import GopherRepetition

    stages = {"gopher_repetition": GopherRepetition(), "gopher_quality": GopherQuality(),
              "c4_quality": C4Quality(filter_no_terminal_punct=False), "fineweb_quality": FineWebQuality()}  # fmt: skip
    batch = pa.table({"id": [str(i) for i in range(len(texts))], "text": texts})

    def clear() -> None:
        languages.split_words.cache_clear()
        spacy_words.reset_cache()

    result = {}
    for name, stage in stages.items():
        clear()
        t0 = time.perf_counter()
        for start in range(0, batch.num_rows, 500):
            stage.apply(batch.slice(start, 500))
        result[name] = time.perf_counter() - t0
    clear()
    t0 = time.perf_counter()
    for start in range(0, batch.num_rows, 500):
        part = batch.slice(start, 500)
        for stage in stages.values():
            part = stage.apply(part).kept
    result["chain"] = time.perf_counter() - t0
    return result


def perplexity(texts: list[str]) -> tuple[float, float]:
    """(documents/s, MB/s) scoring ``texts`` with a model trained on the shared reference documents."""
    import gzip

    from dataprep.quality.perplexity import PerplexityModel, train_model

    ref = []
    for name in ("dolma-cc_en_head-0091.jsonl.gz", "dolma-cc_en_head-0174.jsonl.gz"):
        with gzip.open(SHARED / "documents" / name, "rt", encoding="utf-8") as fh:
            ref += [json.loads(line)["text"] for line in fh]
    with tempfile.TemporaryDirectory() as tmp:
        train_model(ref * 2, "en", os.path.join(tmp, "m"), vocab_size=2000)
        model = PerplexityModel.load(os.path.join(tmp, "m"))
        t0 = time.perf_counter()
        for start in range(0, len(texts), 500):
            model.perplexities(texts[start : start + 500])
        seconds = time.perf_counter() - t0
    return len(texts) / seconds, sum(len(t.encode()) for t in texts) / seconds / 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3, help="copies of the text set (more = steadier figures)")
    args = parser.parse_args()
    texts = [t["text"] for t in build_texts(SHARED)] * args.repeat
    dt_python = datatrove_python()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(texts, fh)
    try:
        theirs = json.loads(
            subprocess.run(
                [dt_python, "-c", DATATROVE_SIDE, fh.name], check=True, capture_output=True, text=True
            ).stdout
        )
    finally:
        os.unlink(fh.name)
    mine = ours(texts)
    print(f"{len(texts)} documents, {sum(map(len, texts)) / 1e6:.1f} M characters, one core each\n")
    print(f"{'stage':<20}{'ours docs/s':>14}{'datatrove docs/s':>18}{'speed-up':>10}")
    for name in mine:
        print(
            f"{name:<20}{len(texts) / mine[name]:>14.0f}{len(texts) / theirs[name]:>18.0f}"
            f"{theirs[name] / mine[name]:>9.1f}x"
        )
    docs_s, mb_s = perplexity(texts)
    print(f"\nperplexity scoring (order 3, 2k vocab): {docs_s:.0f} documents/s, {mb_s:.2f} MB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
