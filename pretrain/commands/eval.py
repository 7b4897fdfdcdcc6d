"""``pretrain eval CHECKPOINT [--data SHARDS_DIR_OR_DOCUMENTS]``: loss and perplexity on held-out text
(``pretrain.inference.evaluate``)."""

from __future__ import annotations

import argparse
import json

from pretrain.inference.evaluate import evaluate_checkpoint


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", help="step-* checkpoint, run out_dir, or model.safetensors")
    parser.add_argument("--data", help="token-shard directory (all its documents), or JSONL/Parquet documents "
                                       "(default: the run's validation split, as the loop computes it)")
    parser.add_argument("--seq-len", type=int, help="with --data: window length (default: the run's seq_len)")
    parser.add_argument("--batch-size", type=int, help="with --data: sequences per forward (default: the run's micro batch)")
    parser.add_argument("--max-batches", type=int, help="evaluate at most this many batches "
                                                        "(default: the run's val_batches without --data, else all)")
    parser.add_argument("--tokenizer", help="tokenizer folder for documents (default: the run's)")
    parser.add_argument("--text-field", default="text", help="text field of JSONL/Parquet documents")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")


def main(args: argparse.Namespace) -> int:
    result = evaluate_checkpoint(args.checkpoint, args.data, args.device, args.seq_len, args.batch_size,
                                 args.max_batches, args.tokenizer, args.text_field)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"loss {result['loss']:.4f}  perplexity {result['perplexity']:.2f}  "
              f"({result['tokens']:,} tokens, {result['batches']} batches of seq_len {result['seq_len']}; "
              f"{result['data']}; {result['checkpoint']})")
    return 0
