"""``pretrain generate CHECKPOINT --prompt TEXT``: sample continuations (``pretrain.inference.generate``)."""

from __future__ import annotations

import argparse
import sys

import torch

from dataprep.core.errors import UsageError
from pretrain.components.device import resolve_device
from pretrain.inference.generate import document_prefix, generate
from pretrain.inference.loading import find_tokenizer, load_trained, model_for_inference


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", help="step-* checkpoint, run out_dir, or model.safetensors")
    parser.add_argument("--prompt", default="", help="text to continue (default: start a new document)")
    parser.add_argument("--max-new-tokens", type=int, default=100)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument(
        "--top-p", type=float, default=0.95, help="sample from the smallest set of tokens holding this much probability"
    )
    parser.add_argument("--greedy", action="store_true", help="always take the most likely token")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-samples", type=int, default=1)
    parser.add_argument("--tokenizer", help="tokenizer folder (default: the run's)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument(
        "--json", action="store_true", help="print the samples as one JSON object (prompt, samples, seed)"
    )


def main(args: argparse.Namespace) -> int:
    if args.max_new_tokens < 1 or args.num_samples < 1 or not 0 < args.top_p <= 1:
        raise UsageError("--max-new-tokens and --num-samples must be positive, --top-p in (0, 1]")
    trained = load_trained(args.checkpoint)
    tokenizer, manifest = find_tokenizer(trained, args.tokenizer)
    model = model_for_inference(trained, resolve_device(args.device))
    prompt = document_prefix(tokenizer, manifest) + tokenizer.encode(args.prompt)
    generator = torch.Generator().manual_seed(args.seed)
    samples = []
    for i in range(args.num_samples):
        new = generate(
            model,
            prompt,
            args.max_new_tokens,
            args.temperature,
            args.top_p,
            args.greedy,
            stop_id=tokenizer.eos_id,
            vocab_limit=tokenizer.vocab_size,
            generator=generator,
        )
        samples.append({"text": args.prompt + tokenizer.decode(new), "tokens": new})
        if args.json:
            continue
        if i:
            print("-" * 40)
        print(samples[-1]["text"])
        sys.stdout.flush()
    if args.json:
        import json

        print(
            json.dumps(
                {
                    "checkpoint": trained.path,
                    "step": trained.step,
                    "prompt": args.prompt,
                    "seed": args.seed,
                    "samples": samples,
                },
                ensure_ascii=False,
            )
        )
    return 0
