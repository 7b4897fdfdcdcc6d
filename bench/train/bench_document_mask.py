"""What attention within documents costs on CPU (run by hand; prints figures, no asserts): the CPU time of
one training step's forward and backward with ``data.document_mask`` against plain causal attention, same
model, weights and tokens, rounds alternating so machine noise hits both. On the CPU the mask is a dense
boolean tensor given to SDPA (flex attention has no CPU backward in torch 2.13), so it saves no compute:
the figure is its overhead.

    python -m bench.train.bench_document_mask \\
        [--d-model 256 --layers 4 --seq-len 1024 --batch 4 --doc-len 300 --rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from pretrain.config.model import ModelConfig
from pretrain.models.llama import Llama


def step_cpu_seconds(model: Llama, tokens: torch.Tensor, documents: torch.Tensor | None) -> float:
    start = time.process_time()
    logits = model(tokens[:, :-1], None if documents is None else documents[:, :-1])
    F.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten()).backward()
    model.zero_grad(set_to_none=True)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--doc-len", type=int, default=300, help="tokens per packed document")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    cfg = ModelConfig(
        vocab_size=8192,
        d_model=args.d_model,
        n_layers=args.layers,
        n_heads=args.d_model // 64,
        n_kv_heads=args.d_model // 64,
        ffn_dim=4 * args.d_model,
        max_seq_len=args.seq_len + 1,
    )
    model = Llama(cfg)
    model.init_weights(0)
    tokens = torch.randint(
        0, cfg.vocab_size, (args.batch, args.seq_len + 1), generator=torch.Generator().manual_seed(0)
    )
    documents = (torch.arange(args.seq_len + 1) // args.doc_len).expand(args.batch, -1).contiguous()
    step_cpu_seconds(model, tokens, None), step_cpu_seconds(model, tokens, documents)  # warm up
    plain, masked = [], []
    for _ in range(args.rounds):
        plain.append(step_cpu_seconds(model, tokens, None))
        masked.append(step_cpu_seconds(model, tokens, documents))
    p, m = statistics.median(plain), statistics.median(masked)
    print(
        f"d_model {args.d_model}, {args.layers} layers, {args.batch} x {args.seq_len} tokens, documents of "
        f"{args.doc_len}: causal {p * 1000:.0f} ms, document mask {m * 1000:.0f} ms CPU per forward+backward "
        f"(x{m / p:.2f}), medians of {args.rounds} alternating rounds, one thread"
    )


if __name__ == "__main__":
    main()
