"""``pretrain eval CHECKPOINT [--data SHARDS_DIR_OR_DOCUMENTS]``: loss and perplexity on held-out text
(``pretrain.inference.evaluate``)."""

from __future__ import annotations

import argparse
import json
import os
import tempfile

from dataprep.core.storage import exists, join_path
from dataprep.tokenize.manifest import MANIFEST_NAME
from pretrain.components.device import resolve_device
from pretrain.inference.evaluate import evaluate_shards, run_validation, tokenize_documents
from pretrain.inference.loading import load_trained


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
    if args.max_batches is not None and args.max_batches < 1:
        raise ValueError(f"--max-batches {args.max_batches}: must be at least 1")
    trained = load_trained(args.checkpoint)
    device = resolve_device(args.device)
    run = trained.run
    seq_len = args.seq_len if args.seq_len is not None else (run.seq_len if run else trained.model.max_seq_len)
    batch_size = args.batch_size if args.batch_size is not None else (run.micro_batch_size if run else 8)
    if seq_len > trained.model.max_seq_len or seq_len < 1 or batch_size < 1:
        raise ValueError(f"--seq-len must be in [1, {trained.model.max_seq_len}] and --batch-size positive")
    if args.data is None:
        result = {"data": "validation split of the run", **run_validation(trained, device, args.max_batches)}
    elif exists(join_path(args.data, MANIFEST_NAME)):  # a shard folder, local or at a URL
        result = {"data": args.data, **evaluate_shards(trained, args.data, device, seq_len, batch_size, args.max_batches)}
    else:
        with tempfile.TemporaryDirectory(prefix="ccp-eval-") as tmp:
            docs = tokenize_documents(args.data, trained, tmp, args.tokenizer, args.text_field)
            shards = os.path.join(tmp, "shards")
            result = {"data": args.data, **docs,
                      **evaluate_shards(trained, shards, device, seq_len, batch_size, args.max_batches)}
    result = {"checkpoint": trained.path, "step": trained.step, **result}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"loss {result['loss']:.4f}  perplexity {result['perplexity']:.2f}  "
              f"({result['tokens']:,} tokens, {result['batches']} batches of seq_len {result['seq_len']}; "
              f"{result['data']}; {trained.path})")
    return 0
