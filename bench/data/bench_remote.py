"""Loader speed from shards at a URL (empty cache) against local memory maps and against what training
consumes (run by hand; prints figures, no asserts).

Serves a synthetic shard folder over HTTP on 127.0.0.1 with an added delay per request (an object store
far away), then times the training loader on it: bare (samples/s) and paced at the training loop's rate
(the 125m preset's tokens/s on one GPU by default, from docs/gpu.md), where what counts is how long each
step waits for its batch.

    python -m bench.data.bench_remote [--latency-ms 30 --tokens 8000000 --steps 10 --block-bytes 65536]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

from dataprep.tokenize.manifest import build_manifest, write_manifest
from dataprep.tokenize.shards import write_shard
from pretrain.components.dataloader import build_loaders
from pretrain.config import DataConfig
from tests.range_server import serve_folder

TRAIN_TOKENS_PER_S_125M = 420_478  # docs/gpu.md, "Throughput and MFU", one GPU


def make_shards(folder: str, tokens: int, shards: int, doc_tokens: int = 4096) -> str:
    """Random uint16 documents of ``doc_tokens`` tokens in ``shards`` shards plus the manifest."""
    rng = np.random.default_rng(0)
    per_shard = tokens // shards // doc_tokens
    entries = [write_shard(f"{folder}/part-{i:05d}", (rng.integers(1, 50_000, doc_tokens) for _ in range(per_shard)), np.uint16)
               for i in range(shards)]
    write_manifest(folder, build_manifest(entries, {"vocab_size": 50_304, "special_ids": {"eos": 0}}, "uint16"))
    return folder


def time_loader(path: str, args, cache_dir: str, pace_s: float = 0.0) -> dict:
    """Samples/s over ``args.steps`` steps, and the mean wait per step when each step also 'trains' ``pace_s``."""
    cache = {"block_bytes": args.block_bytes, "max_bytes": args.cache_bytes, "workers": args.workers,
             "read_ahead_steps": args.read_ahead}
    start = time.perf_counter()
    loader, _ = build_loaders(DataConfig(sources=[{"path": path}], val_fraction=0.0, cache=cache), args.seq_len,
                              args.global_batch, args.global_batch, 0, 1, cache_dir=cache_dir)
    opened = time.perf_counter() - start
    waits = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        loader.next_step()
        waits.append(time.perf_counter() - t0)
        time.sleep(pace_s)
    return {"open_s": opened, "samples_per_s": args.global_batch / np.mean(waits), "wait_ms": 1000 * np.mean(waits[1:] or waits)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=8_000_000, help="many blocks, so samples rarely share one")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--global-batch", type=int, default=16, help="samples per step of this process")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--latency-ms", type=float, default=30.0, help="added to every request")
    parser.add_argument("--block-bytes", type=int, default=2**16)
    parser.add_argument("--cache-bytes", type=int, default=2**30)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--read-ahead", type=int, default=2, help="steps fetched ahead")
    parser.add_argument("--train-tokens-per-s", type=float, default=TRAIN_TOKENS_PER_S_125M)
    args = parser.parse_args()
    need = args.train_tokens_per_s / args.seq_len
    pace = args.global_batch / need
    with tempfile.TemporaryDirectory() as tmp:
        folder = make_shards(f"{tmp}/shards", args.tokens, args.shards)
        with serve_folder(tmp, latency_s=args.latency_ms / 1000) as server:
            rows = {}
            for name, path, pace_s in (("local", folder, 0.0), ("remote, empty cache", f"{server.url}/shards", 0.0),
                                       ("remote, paced as training", f"{server.url}/shards", pace)):
                before = server.requests
                rows[name] = {**time_loader(path, args, f"{tmp}/cache-{len(rows)}", pace_s), "requests": server.requests - before}
    print(f"training consumes {need:,.0f} samples/s ({args.train_tokens_per_s:,.0f} tokens/s, seq_len {args.seq_len}); "
          f"a step of {args.global_batch} samples trains {1000 * pace:.0f} ms; {args.latency_ms:.0f} ms per request")
    print(f"{'source':<28}{'open s':>8}{'samples/s':>12}{'wait ms/step':>14}{'requests':>10}")
    for name, row in rows.items():
        print(f"{name:<28}{row['open_s']:>8.2f}{row['samples_per_s']:>12,.0f}{row['wait_ms']:>14.1f}{row['requests']:>10}")


if __name__ == "__main__":
    main()
