"""How long a checkpoint holds up training, synchronous against asynchronous (``checkpoint.async_save``), on
CPU in one process (run by hand; prints figures, no asserts).

Both modes train the same model; rounds alternate between them so machine noise hits both. Each round
saves once and trains ``--steps`` steps after it: the figures are the time the save call blocks the loop
(wall), the loop's step time while the background write runs, the time left to wait for the write at the
end, and the process's CPU time for the save and those steps (every thread: the writer's work counts).
The ratio to read is async/sync of the blocked time.

    python -m bench.train.bench_async_save [--d-model 512 --layers 8 --steps 4 --rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

import torch

from pretrain.config.loading import load_train_config
from pretrain.models.llama import num_params
from pretrain.train import Trainer
from tests.support.train_fixtures import make_token_dataset, tiny_config


def one_round(trainer: Trainer, steps: int) -> dict:
    """Save at the current step, train ``steps`` more, wait for the save; times of each part."""
    cpu0, t0 = time.process_time(), time.perf_counter()
    trainer._save()
    blocked = time.perf_counter() - t0
    t1 = time.perf_counter()
    trainer.train(end=trainer.state.step + steps)
    step_time = (time.perf_counter() - t1) / steps
    t2 = time.perf_counter()
    if trainer.saver is not None:
        trainer.saver.wait()
    return {
        "blocked_s": blocked,
        "step_s": step_time,
        "wait_s": time.perf_counter() - t2,
        "cpu_s": time.process_time() - cpu0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--steps", type=int, default=4, help="training steps after each save")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        data = make_token_dataset(f"{tmp}/tokens", n_docs=400, vocab=2048, max_len=600)
        trainers = {}
        for mode in ("sync", "async"):
            cfg = tiny_config(
                data,
                f"{tmp}/{mode}",
                max_steps=10_000,
                seq_len=args.seq_len,
                checkpoint={"every_steps": 10_000, "keep_last": 1, "async_save": mode == "async"},
                log={"every_steps": 10_000, "val_every_steps": 10_000, "val_batches": 1},
            )
            cfg["model"] |= {
                "vocab_size": 2048,
                "d_model": args.d_model,
                "n_layers": args.layers,
                "n_heads": 8,
                "n_kv_heads": 8,
                "ffn_dim": 8 * args.d_model // 3,
                "max_seq_len": args.seq_len,
            }
            trainer = Trainer(load_train_config(cfg))
            trainer.resume(None)
            trainer.start_logging()
            trainer.train(end=2)  # AdamW's moments exist: the checkpoint has its full size
            trainers[mode] = trainer
        params = num_params(trainers["sync"].cfg.model)
        results: dict[str, list[dict]] = {"sync": [], "async": []}
        for _ in range(args.rounds):
            for mode, trainer in trainers.items():
                results[mode].append(one_round(trainer, args.steps))
        for trainer in trainers.values():
            trainer.finish()
    summary = {
        mode: {key: statistics.median(r[key] for r in rounds) for key in rounds[0]} for mode, rounds in results.items()
    }
    print(
        f"{params / 1e6:.1f}M parameters, checkpoint ~{params * 12 / 2**20:.0f} MiB (weights and AdamW), "
        f"{args.rounds} rounds, {args.steps} steps after each save; medians:"
    )
    for mode, figures in summary.items():
        print(f"  {mode:5s}: " + ", ".join(f"{key} {value:.3f}" for key, value in figures.items()))
    ratio = summary["async"]["blocked_s"] / summary["sync"]["blocked_s"]
    print(f"blocked by a save, async / sync: {ratio:.3f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump({"params": params, "rounds": results, "median": summary, "blocked_ratio": ratio}, fh, indent=1)


if __name__ == "__main__":
    main()
