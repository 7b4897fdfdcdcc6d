"""What a per-layer diagnostics step costs on CPU (run by hand; prints figures, no asserts).

The same run (model, batches, initial weights) with ``log.diagnostics_every_steps`` off and at 1 (every
step measures), in alternating rounds so machine noise hits both; each round's steps are timed by CPU time
(set-up excluded) and the ratio of medians is reported: the cost of one diagnostic step relative to an
ordinary one, which a run every N steps pays once per N.

    python -m bench.train.bench_diagnostics [--d-model 256 --layers 4 --seq-len 256 --batch 8 --steps 8 --rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import torch

from pretrain.config.loading import load_train_config
from pretrain.models.llama import num_params
from pretrain.train import Trainer
from tests.support.train_fixtures import make_token_dataset, tiny_config


def timed_steps(cfg) -> float:
    """CPU seconds per step of ``cfg``'s run, set-up and the first (warm-up) step excluded."""
    trainer = Trainer(cfg)
    trainer.resume(None)
    trainer.start_logging()
    trainer.train(end=1)
    started = time.process_time()
    trainer.train(end=cfg.max_steps)
    per_step = (time.process_time() - started) / (cfg.max_steps - 1)
    trainer.finish()
    return per_step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    work = tempfile.mkdtemp(prefix="bench-diagnostics-")
    data = make_token_dataset(os.path.join(work, "tokens"), n_docs=400, vocab=args.vocab, min_len=200, max_len=2000)
    model = {
        "vocab_size": args.vocab,
        "d_model": args.d_model,
        "n_layers": args.layers,
        "n_heads": args.d_model // 64,
        "n_kv_heads": args.d_model // 64,
        "ffn_dim": args.d_model * 8 // 3 // 64 * 64,
        "max_seq_len": args.seq_len,
    }

    def config(out: str, every: int):
        return load_train_config(
            tiny_config(
                data,
                out,
                model=model,
                device="cpu",
                seq_len=args.seq_len,
                micro_batch_size=args.batch,
                global_batch_size=args.batch,
                max_steps=args.steps,
                data={"sources": [{"path": data}], "val_fraction": 0.0},
                log={"every_steps": 10**6, "val_every_steps": 10**6, "diagnostics_every_steps": every},
                checkpoint={"every_steps": 10**6},
                health={"straggler_every_steps": 0},
            )
        )

    off, on = [], []
    for r in range(args.rounds):
        off.append(timed_steps(config(os.path.join(work, f"off-{r}"), 0)))
        on.append(timed_steps(config(os.path.join(work, f"on-{r}"), 1)))
    m_off, m_on = statistics.median(off), statistics.median(on)
    print(
        f"model {num_params(config(work, 0).model):,} params, batch {args.batch}x{args.seq_len}, 1 thread, "
        f"{args.rounds} rounds of {args.steps - 1} steps"
    )
    print(
        f"CPU time per step  ordinary {1e3 * m_off:.1f} ms   diagnostic {1e3 * m_on:.1f} ms   "
        f"ratio {m_on / m_off:.2f}x   (every 100 steps: {100 * (m_on / m_off - 1) / 100:+.2f}% of the run)"
    )


if __name__ == "__main__":
    main()
