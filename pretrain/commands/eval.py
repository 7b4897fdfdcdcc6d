"""``pretrain eval CHECKPOINT [--data SHARDS_DIR_OR_DOCUMENTS] [--tasks NAME,...]``: loss, perplexity and bits
per byte on held-out text, and lm-evaluation-harness task scores (``pretrain.inference.evaluate``)."""

from __future__ import annotations

import argparse
import json

from dataprep.core.errors import UsageError
from pretrain.inference.evaluate import TaskSpec, evaluate_checkpoint


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", help="step-* checkpoint, run out_dir, or model.safetensors")
    parser.add_argument(
        "--data",
        help="token-shard directory (all its documents), or JSONL/Parquet documents "
        "(default: the run's validation split, as the loop computes it)",
    )
    parser.add_argument("--seq-len", type=int, help="with --data: window length (default: the run's seq_len)")
    parser.add_argument(
        "--batch-size", type=int, help="with --data: sequences per forward (default: the run's micro batch)"
    )
    parser.add_argument(
        "--max-batches",
        type=int,
        help="evaluate at most this many batches (default: the run's val_batches without --data, else all)",
    )
    parser.add_argument("--tokenizer", help="tokenizer folder for documents (default: the run's)")
    parser.add_argument("--text-field", default="text", help="text field of JSONL/Parquet documents")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    harness = parser.add_argument_group("downstream tasks (lm-evaluation-harness, ccpretrain[eval])")
    harness.add_argument(
        "--tasks",
        help="task names, comma-separated: the harness's own or local YAML files "
        "under --include-path (default: the run's eval: tasks, if any)",
    )
    harness.add_argument("--include-path", help="folder of local task YAML files")
    harness.add_argument("--limit", type=float, help="items per task (below 1: a share of each task's items)")
    harness.add_argument("--num-fewshot", type=int, help="examples in each prompt (default: the task's)")


def main(args: argparse.Namespace) -> int:
    limit = None if args.limit is None else (int(args.limit) if args.limit >= 1 else args.limit)
    if limit is not None and limit <= 0 or args.num_fewshot is not None and args.num_fewshot < 0:
        raise UsageError("--limit must be positive and --num-fewshot at least 0")
    names = [t.strip() for t in (args.tasks or "").split(",") if t.strip()]
    tasks = TaskSpec(names, args.include_path, limit, args.num_fewshot)
    result = evaluate_checkpoint(
        args.checkpoint,
        args.data,
        args.device,
        args.seq_len,
        args.batch_size,
        args.max_batches,
        args.tokenizer,
        args.text_field,
        tasks,
    )
    if args.json:
        print(json.dumps(result))
        return 0
    bpb = f"  bits/byte {result['bits_per_byte']:.4f}" if result.get("bits_per_byte") is not None else ""
    print(
        f"loss {result['loss']:.4f}  perplexity {result['perplexity']:.2f}{bpb}  "
        f"({result['tokens']:,} tokens, {result['batches']} batches of seq_len {result['seq_len']}; "
        f"{result['data']}; {result['checkpoint']})"
    )
    for task, metrics in result.get("tasks", {}).items():
        print(
            f"{task}: " + "  ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in metrics.items())
        )
    return 0
