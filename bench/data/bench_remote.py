"""Loader speed from shards at a URL (empty cache) against local memory maps and against what training
consumes (run by hand; prints figures, no asserts).

Serves a synthetic shard folder over HTTP on 127.0.0.1 from another process (as an object store is) with
an added delay per request (one far away), then times the training loader on it: bare (samples/s) and
paced at the training loop's rate (the 125m preset's tokens/s on one GPU by default, from docs/gpu.md),
where what counts is how long each step waits for its batch after the first (warm-up) steps. CPU time is
the loader's process (its read-ahead threads included), not the server's.

    python -m bench.data.bench_remote [--latency-ms 30 --tokens 64000000 --steps 40 --block-bytes 65536]
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import tempfile
import time
from contextlib import contextmanager

import numpy as np

from dataprep.tokenize.manifest import build_manifest, write_manifest
from dataprep.tokenize.shards import write_shard
from pretrain.components.dataloader import build_loaders
from pretrain.config.data import DataConfig
from tests.support.range_server import RangeServer

TRAIN_TOKENS_PER_S_125M = 420_478  # docs/gpu.md, "Throughput and MFU", one GPU


def make_shards(folder: str, tokens: int, shards: int, doc_tokens: int = 4096) -> str:
    """Random uint16 documents of ``doc_tokens`` tokens in ``shards`` shards plus the manifest."""
    rng = np.random.default_rng(0)
    per_shard = tokens // shards // doc_tokens
    entries = [
        write_shard(
            f"{folder}/part-{i:05d}", (rng.integers(1, 50_000, doc_tokens) for _ in range(per_shard)), np.uint16
        )
        for i in range(shards)
    ]
    write_manifest(folder, build_manifest(entries, {"vocab_size": 50_304, "special_ids": {"eos": 0}}, "uint16"))
    return folder


class CountingServer(RangeServer):
    """A ``RangeServer`` whose request count is shared with the parent process."""

    def __init__(self, root: str, latency_s: float, counter):
        super().__init__(root, latency_s=latency_s)
        self.counter = counter

    def count_request(self) -> bool:
        with self.counter.get_lock():
            self.counter.value += 1
        return super().count_request()


def _serve(root: str, latency_s: float, counter, urls) -> None:
    server = CountingServer(root, latency_s, counter)
    urls.put(server.url)
    server.serve_forever()


@contextmanager
def serve_in_process(root: str, latency_s: float):
    """(URL, request counter) of a range server over ``root`` in a child process: its threads do not share
    the loader's interpreter, as an object store's would not."""
    ctx = multiprocessing.get_context("spawn")
    counter, urls = ctx.Value("q", 0), ctx.Queue()
    process = ctx.Process(target=_serve, args=(root, latency_s, counter, urls), daemon=True)
    process.start()
    try:
        yield urls.get(timeout=120), counter
    finally:
        process.terminate()
        process.join()


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def time_loader(path: str, args, cache_dir: str, pace_s: float = 0.0) -> dict:
    """Samples/s over ``args.steps`` steps, and the mean wait per step after ``args.warmup`` steps when each
    step also 'trains' ``pace_s``."""
    cache = {
        "block_bytes": args.block_bytes,
        "max_bytes": args.cache_bytes,
        "workers": args.workers,
        "read_ahead_steps": args.read_ahead,
    }
    start, cpu = time.perf_counter(), cpu_s()
    loader, _ = build_loaders(
        DataConfig(sources=[{"path": path}], val_fraction=0.0, cache=cache),
        args.seq_len,
        args.global_batch,
        args.global_batch,
        0,
        1,
        cache_dir=cache_dir,
    )
    opened = time.perf_counter() - start
    waits = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        loader.next_step()
        waits.append(time.perf_counter() - t0)
        time.sleep(pace_s)
    cpu = cpu_s() - cpu
    loader.close()
    after = waits[args.warmup :] or waits
    return {
        "open_s": opened,
        "samples_per_s": args.global_batch / np.mean(waits),
        "wait_ms": 1000 * np.mean(after),
        "max_wait_ms": 1000 * np.max(after),
        "cpu_s": cpu,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=64_000_000, help="many blocks, so samples rarely share one")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--global-batch", type=int, default=16, help="samples per step of this process")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=2, help="first steps left out of the wait per step")
    parser.add_argument("--latency-ms", type=float, default=30.0, help="added to every request")
    parser.add_argument("--block-bytes", type=int, default=2**16)
    parser.add_argument("--cache-bytes", type=int, default=2**30)
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--read-ahead", type=int, default=4, help="steps fetched ahead")
    parser.add_argument("--train-tokens-per-s", type=float, default=TRAIN_TOKENS_PER_S_125M)
    args = parser.parse_args()
    need = args.train_tokens_per_s / args.seq_len
    pace = args.global_batch / need
    with tempfile.TemporaryDirectory() as tmp:
        folder = make_shards(f"{tmp}/shards", args.tokens, args.shards)
        with serve_in_process(tmp, args.latency_ms / 1000) as (url, requests):
            rows = {}
            for name, path, pace_s in (
                ("local", folder, 0.0),
                ("remote, empty cache", f"{url}/shards", 0.0),
                ("remote, paced as training", f"{url}/shards", pace),
            ):
                before = requests.value
                rows[name] = {
                    **time_loader(path, args, f"{tmp}/cache-{len(rows)}", pace_s),
                    "requests": requests.value - before,
                }
    print(
        f"training consumes {need:,.0f} samples/s ({args.train_tokens_per_s:,.0f} tokens/s, seq_len {args.seq_len}); "
        f"a step of {args.global_batch} samples trains {1000 * pace:.0f} ms; {args.latency_ms:.0f} ms per request"
    )
    print(
        f"{'source':<28}{'open s':>8}{'samples/s':>12}{'wait ms/step':>14}{'max wait ms':>13}{'CPU s':>8}"
        f"{'requests':>10}"
    )
    for name, row in rows.items():
        print(
            f"{name:<28}{row['open_s']:>8.2f}{row['samples_per_s']:>12,.0f}{row['wait_ms']:>14.1f}{row['max_wait_ms']:>13.1f}"
            f"{row['cpu_s']:>8.2f}{row['requests']:>10}"
        )


if __name__ == "__main__":
    main()
