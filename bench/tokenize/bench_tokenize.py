"""Tokens/s per core of the tokenize stage against raw ``SentencePieceProcessor.encode`` on the same text.

Target: the stage (encode + EOS + Megatron shard writing with SHA-256) keeps >= 80% of raw encode speed.
Speed is tokens per CPU-second of this process (one core), runs alternate (raw, stage, raw, ...) and
the best of each is compared, because the machine is shared and noisy; only the ratio is meaningful. ``--spark`` adds
the full Spark runner on local[1] (Arrow transfer JVM <-> Python included). Text: the team's real multilingual sentences
and CC documents.

    python -m bench.tokenize.bench_tokenize [--shared ../shared/data] [--repeat 5] [--vocab 16000] [--spark]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

from bench.common.paths import SHARED
from dataprep.core.stage import DOC_SCHEMA
from dataprep.tokenize.shards import ShardWriter, dtype_for_vocab
from dataprep.tokenize.stage import Tokenize
from dataprep.tokenize.tokenizer import Tokenizer, train_tokenizer

BATCH = 2000  # documents per Arrow batch, as spark.sql.execution.arrow.maxRecordsPerBatch


def load_documents(shared: Path) -> list[str]:
    """Real text: lingua sentences grouped 20 to a document (same language), plus the CC documents."""
    rows = [
        json.loads(line)
        for line in open(shared / "langid" / "lingua-sentences-75langs-300each.jsonl", encoding="utf-8")
    ]
    docs = [" ".join(r["text"] for r in rows[i : i + 20]) for i in range(0, len(rows), 20)]
    for name in sorted(os.listdir(shared / "documents")):
        path = shared / "documents" / name
        opener = gzip.open if name.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as fh:
            docs += [json.loads(line)["text"] for line in fh]
    return docs


def raw_encode(tok: Tokenizer, texts: list[str], numpy: bool) -> int:
    total = 0
    for i in range(0, len(texts), BATCH):
        out = tok.sp.encode(texts[i : i + BATCH], num_threads=1, **({"return_type": "numpy"} if numpy else {}))
        total += sum(len(ids) for ids in out)
    return total


def stage_encode(stage: Tokenize, tok: Tokenizer, table: pa.Table, out_dir: str) -> int:
    """What one Spark task does per partition, minus Spark: encode batches, add EOS, write shards."""
    total = 0
    with ShardWriter(f"{out_dir}/shard-00000", dtype_for_vocab(tok.vocab_size), stage.tokens_per_shard) as writer:
        for batch in table.to_batches(BATCH):
            _, _, docs = stage.encode(pa.Table.from_batches([batch]), tok)
            for doc in docs:
                writer.add(doc)
                total += len(doc)
        writer.close()
    return total


def cpu_rate(fn) -> tuple[float, int]:
    """Tokens per CPU-second of this process: robust to other jobs sharing the machine."""
    t0 = time.process_time()
    tokens = fn()
    return tokens / (time.process_time() - t0), tokens


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", default=str(SHARED))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--vocab", type=int, default=16_000)
    parser.add_argument("--copies", type=int, default=2, help="repeat the corpus to lengthen each run")
    parser.add_argument("--spark", action="store_true", help="also time the Spark runner on local[1]")
    args = parser.parse_args()

    texts = load_documents(Path(args.shared))
    work = tempfile.mkdtemp(prefix="bench-tokenize-")
    tok = train_tokenizer(texts, f"{work}/tok", vocab_size=args.vocab, character_coverage=0.9995)
    texts = texts * args.copies
    n = len(texts)
    table = pa.table(
        {"id": [str(i) for i in range(n)], "url": [""] * n, "date": [""] * n, "source": [""] * n, "text": texts},
        schema=DOC_SCHEMA,
    )
    stage = Tokenize(tokenizer=f"{work}/tok", tokens_per_shard=1_000_000)
    mb = sum(len(t.encode()) for t in texts) / 1e6
    print(f"{n} documents, {mb:.1f} MB of text, vocab {tok.vocab_size}, best of {args.repeat} alternating runs, 1 core")

    rates = {"raw": [], "raw_numpy": [], "stage": []}
    for _ in range(args.repeat):  # interleave so load spikes hit all variants alike
        rates["raw"].append(cpu_rate(lambda: raw_encode(tok, texts, numpy=False)))
        rates["raw_numpy"].append(cpu_rate(lambda: raw_encode(tok, texts, numpy=True)))
        rates["stage"].append(cpu_rate(lambda: stage_encode(stage, tok, table, f"{work}/shards")))
    best = {k: max(r for r, _ in v) for k, v in rates.items()}
    raw_tokens, stage_tokens = rates["raw"][0][1], rates["stage"][0][1]
    assert stage_tokens == raw_tokens + n, "the stage must produce exactly raw tokens + one EOS per document"
    for name in ("raw", "raw_numpy", "stage"):
        print(f"  {name:<10} {best[name] / 1e6:7.3f} M tokens/CPU-s   ratio to raw {best[name] / best['raw']:.2f}")

    if args.spark:
        import pyarrow.parquet as pq

        from pipelines.global_runners import run_global
        from pipelines.spark import get_spark
        from pipelines.steps import StepContext

        pq.write_table(table, f"{work}/docs.parquet")
        spark = get_spark("local[1]", conf={"spark.sql.execution.arrow.maxRecordsPerBatch": str(BATCH)})
        df = spark.read.parquet(f"{work}/docs.parquet").coalesce(1)
        ctx = StepContext(spark=spark, step_dir=f"{work}/step", config=None)
        spark_best = float("inf")
        for _ in range(max(2, args.repeat // 2)):
            t0 = time.perf_counter()
            out = run_global(df, stage, ctx)
            out.count()
            spark_best = min(spark_best, time.perf_counter() - t0)
            out.unpersist()
        rate = (raw_tokens + n) / spark_best
        print(
            f"  {'spark[1]':<10} {rate / 1e6:7.3f} M tokens/wall-s (end to end on local[1], incl. job "
            "startup; wall time,"
        )
        print("             so not comparable to CPU-s figures on a shared machine)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
