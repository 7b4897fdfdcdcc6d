"""``pretrain generate CHECKPOINT --prompt TEXT``: sample continuations, for a quick look at what a model
learned.

The prompt is encoded as a document start is seen in training: after the end-of-document token that
closes the previous document (or BOS when the data had one), so a model that learned document
openings uses them. Greedy decoding or temperature + nucleus (top-p) sampling, seeded; stops at the
end-of-document token. No KV cache: every step reruns the window, which is fine for short samples.
"""

from __future__ import annotations

import argparse
import sys

import torch

from pretrain.components.device import resolve_device
from pretrain.inference.loading import find_tokenizer, load_trained, model_for_inference


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", help="step-* checkpoint, run out_dir, or model.safetensors")
    parser.add_argument("--prompt", default="", help="text to continue (default: start a new document)")
    parser.add_argument("--max-new-tokens", type=int, default=100)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--top-p", type=float, default=0.95, help="sample from the smallest set of tokens "
                                                                  "holding this much probability")
    parser.add_argument("--greedy", action="store_true", help="always take the most likely token")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-samples", type=int, default=1)
    parser.add_argument("--tokenizer", help="tokenizer folder (default: the run's)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--json", action="store_true", help="print the samples as one JSON object (prompt, samples, seed)")


def next_token(logits: torch.Tensor, temperature: float, top_p: float, greedy: bool,
               generator: torch.Generator | None = None) -> int:
    """One token id from the last position's logits (vocab,)."""
    if greedy or temperature <= 0:
        return int(logits.argmax())
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(descending=True)
        outside = sorted_probs.cumsum(0) - sorted_probs >= top_p  # the mass before a token already suffices
        sorted_probs[outside] = 0.0
        probs = torch.zeros_like(probs).scatter_(0, order, sorted_probs)
    return int(torch.multinomial(probs, 1, generator=generator))


@torch.no_grad()
def generate(model, ids: list[int], max_new_tokens: int, temperature: float = 1.0, top_p: float = 1.0,
             greedy: bool = False, stop_id: int | None = None, vocab_limit: int | None = None,
             generator: torch.Generator | None = None) -> list[int]:
    """The new token ids after ``ids`` (at most ``max_new_tokens``, ending at ``stop_id`` if drawn);
    ids at or beyond ``vocab_limit`` (padding of the embedding table) are never drawn."""
    device = model.output.weight.device
    tokens = torch.tensor([ids], dtype=torch.long, device=device)
    new: list[int] = []
    for _ in range(max_new_tokens):
        logits = model(tokens[:, -model.cfg.max_seq_len:])[0, -1].float()
        if vocab_limit is not None:
            logits[vocab_limit:] = float("-inf")
        token = next_token(logits.cpu(), temperature, top_p, greedy, generator)
        new.append(token)
        if token == stop_id:
            break
        tokens = torch.cat([tokens, torch.tensor([[token]], device=device)], dim=1)
    return new


def document_prefix(tokenizer, manifest: dict) -> list[int]:
    """What precedes a document's tokens in the training stream."""
    return [tokenizer.bos_id] if manifest.get("add_bos") else [tokenizer.eos_id]


def main(args: argparse.Namespace) -> int:
    if args.max_new_tokens < 1 or args.num_samples < 1 or not 0 < args.top_p <= 1:
        raise ValueError("--max-new-tokens and --num-samples must be positive, --top-p in (0, 1]")
    trained = load_trained(args.checkpoint)
    tokenizer, manifest = find_tokenizer(trained, args.tokenizer)
    model = model_for_inference(trained, resolve_device(args.device))
    prompt = document_prefix(tokenizer, manifest) + tokenizer.encode(args.prompt)
    generator = torch.Generator().manual_seed(args.seed)
    samples = []
    for i in range(args.num_samples):
        new = generate(model, prompt, args.max_new_tokens, args.temperature, args.top_p, args.greedy,
                       stop_id=tokenizer.eos_id, vocab_limit=tokenizer.vocab_size, generator=generator)
        samples.append({"text": args.prompt + tokenizer.decode(new), "tokens": new})
        if args.json:
            continue
        if i:
            print("-" * 40)
        print(samples[-1]["text"])
        sys.stdout.flush()
    if args.json:
        import json

        print(json.dumps({"checkpoint": trained.path, "step": trained.step, "prompt": args.prompt, "seed": args.seed,
                          "samples": samples}, ensure_ascii=False))
    return 0
