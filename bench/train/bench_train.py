"""Training-loop overhead and loader speed on CPU (run by hand; prints figures, no asserts).

1. Step time of our loop (``pretrain.train.run``: loader, grad clipping, scheduler, metrics) against a
   bare eager loop (forward, cross-entropy, backward, AdamW step) on the same model, initial weights and
   batches. Rounds alternate between the two so machine noise hits both; we report the ratio of medians
   (target: overhead <= 5%).
2. Loader throughput (samples/s, memmap reads + order) against what the loop consumes per second.

    python -m bench.train.bench_train [--d-model 256 --layers 4 --seq-len 256 --batch 8 --steps 12 --rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import torch
import torch.nn.functional as F

from pretrain.components.dataloader import build_loaders
from pretrain.components.optimizer import build_optimizer
from pretrain.config.loading import load_train_config
from pretrain.models.llama import Llama
from pretrain.train import run
from tests.support.train_fixtures import make_token_dataset, tiny_config


def bare_loop(cfg, batches: list[torch.Tensor]) -> list[float]:
    """The minimal eager loop: same model config, seed and batches; returns per-step seconds."""
    model = Llama(cfg.model)
    model.init_weights(cfg.seed)
    opt = build_optimizer(model, cfg.optim)
    times = []
    for batch in batches:
        t0 = time.perf_counter()
        logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()  # our loop reads the loss each log step too
        times.append(time.perf_counter() - t0)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    work = tempfile.mkdtemp(prefix="bench-train-")
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

    def config(out: str):
        # one micro-batch per step, no validation or checkpoint inside the timed steps, log every step
        return load_train_config(
            tiny_config(
                data,
                out,
                model=model,
                seq_len=args.seq_len,
                micro_batch_size=args.batch,
                global_batch_size=args.batch,
                max_steps=args.steps,
                optim={"grad_clip": 1.0, "warmup_steps": 2},
                data={"sources": [{"path": data}], "val_fraction": 0.0},
                log={"every_steps": 1, "val_every_steps": 10**6},
                checkpoint={"every_steps": 10**6},
            )
        )

    cfg = config(os.path.join(work, "probe"))
    loader, _ = build_loaders(cfg.data, cfg.seq_len, cfg.global_batch_size, cfg.micro_batch_size, 0, 1)
    batches = [loader.next_step()[0] for _ in range(args.steps)]

    ours, bare = [], []
    for r in range(args.rounds):
        records = run(config(os.path.join(work, f"ours-{r}")))
        ours += [rec["step_time_s"] for rec in records[2:]]  # skip warm-up steps
        bare += bare_loop(cfg, batches)[2:]
    m_ours, m_bare = statistics.median(ours), statistics.median(bare)
    print(f"model {Llama(cfg.model).num_params():,} params, batch {args.batch}x{args.seq_len}, threads {args.threads}")
    print(
        f"step time  ours {1e3 * m_ours:.1f} ms   bare {1e3 * m_bare:.1f} ms   "
        f"overhead {100 * (m_ours / m_bare - 1):+.1f}%  (median of {len(ours)} steps each)"
    )

    loader.load_state_dict({"samples_consumed": 0})
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 2.0:
        loader.next_step()
        n += args.batch
    load_rate = n / (time.perf_counter() - t0)
    use_rate = args.batch / m_ours
    print(
        f"loader {load_rate:,.0f} samples/s   loop consumes {use_rate:,.1f} samples/s   "
        f"ratio {load_rate / use_rate:,.0f}x"
    )


if __name__ == "__main__":
    main()
