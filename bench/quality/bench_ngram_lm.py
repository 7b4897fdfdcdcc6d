"""Perplexity scoring speed by n-gram order, and against the scorer of an earlier commit (one-word keys,
orders up to 4): the same model arrays scored by both, so the ratio is the cost of the wider keys.

    python -m bench.quality.bench_ngram_lm [--base 50acd81] [--repeat 5]

Trains CCNet-style models (SentencePiece 2k + KN orders 3, 4, 5) on four fifths of the shared Common
Crawl documents and scores the rest; prints tokens/s per order and base / now per order <= 4.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common.paths import ROOT, SHARED


def _base_module(rev: str):
    """``dataprep/quality/ngram_lm.py`` as it was at ``rev`` (from git), loaded under another name."""
    source = subprocess.run(
        ["git", "show", f"{rev}:dataprep/quality/ngram_lm.py"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    path = Path(tempfile.mkdtemp()) / "ngram_lm_base.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("ngram_lm_base", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _best(fns, repeat: int) -> list[float]:
    """Best time of each function, run in turns (a busy machine slows them alike)."""
    times = [[] for _ in fns]
    for _ in range(repeat):
        for fn, spent in zip(fns, times):
            t0 = time.perf_counter()
            fn()
            spent.append(time.perf_counter() - t0)
    return [min(spent) for spent in times]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="50acd81", help="commit whose scorer is the baseline")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per case (the best counts)")
    args = parser.parse_args()
    from dataprep.quality.perplexity import PerplexityModel, _lines, train_model

    texts = []
    for name in (
        "dolma-cc_en_head-0091.jsonl.gz",
        "dolma-cc_en_head-0174.jsonl.gz",
        "dolma-cc-2023-06-documents-000.json.gz",
    ):
        with gzip.open(SHARED / "documents" / name, "rt", encoding="utf-8") as fh:
            texts += [json.loads(line)["text"] for line in fh]
    with open(SHARED / "documents" / "redpajama-cc-2023-06-refined.jsonl", encoding="utf-8") as fh:
        texts += [json.loads(line)["text"] for line in fh]
    train, held = texts[: len(texts) * 4 // 5], texts[len(texts) * 4 // 5 :]
    base = _base_module(args.base)
    print(f"{len(train)} training documents, {len(held)} held-out documents scored; best of {args.repeat}\n")
    print(f"{'order':>5}{'tokens':>10}{'tokens/s now':>15}{'tokens/s base':>15}{'base/now time':>15}")
    with tempfile.TemporaryDirectory() as tmp:
        for order in (3, 4, 5):
            train_model(train, "en", f"{tmp}/m{order}", vocab_size=2000, order=order)
            model = PerplexityModel.load(f"{tmp}/m{order}")
            lines = model.sp.Encode([line for t in held for line in _lines(t)]) * 20  # steadier timings
            tokens = sum(map(len, lines)) + len(lines)
            lm = model.lm
            if order > base.MAX_ORDER:
                (now,) = _best([lambda: lm.token_logprobs(lines)], args.repeat)
                print(f"{order:>5}{tokens:>10}{tokens / now:>15,.0f}")
                continue
            old = base.NGramLM(lm.order, lm.vocab_size, lm.bos, lm.eos, lm.keys, lm.logp, lm.ctx, lm.bow, lm.unk)
            now, then = _best([lambda: lm.token_logprobs(lines), lambda: old.token_logprobs(lines)], args.repeat)
            print(f"{order:>5}{tokens:>10}{tokens / now:>15,.0f}{tokens / then:>15,.0f}{then / now:>15.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
