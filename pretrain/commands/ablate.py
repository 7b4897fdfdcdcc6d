"""``pretrain ablate --arm NAME=PATH --arm ... --eval HELD_OUT --output OUT``: did this data make a
better model? (``pretrain.ablation.run``)"""

from __future__ import annotations

import argparse
import json

from dataprep.core.arguments import output_folder, positive_float, positive_int
from dataprep.core.cli import add_output_argument
from pretrain.ablation.run import AblationSpec, run_ablation


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = AblationSpec([], [], "")
    parser.add_argument(
        "--arm",
        action="append",
        required=True,
        metavar="NAME=PATH",
        help="an arm (repeat, at least two): token shards, a pipeline's output folder, JSONL/Parquet "
        "documents, or a mixture preset",
    )
    parser.add_argument(
        "--eval",
        action="append",
        default=[],
        metavar="FILE",
        help="held-out JSONL/Parquet documents scored in bits per byte (repeatable)",
    )
    add_output_argument(
        parser,
        required=True,
        type=output_folder,
        help="the ablation's folder: results.json, index.html, the models (a rerun resumes)",
    )
    parser.add_argument("--seeds", type=positive_int, default=defaults.seeds, help="models per arm (at least 2)")
    parser.add_argument("--json", action="store_true", help="print results.json's pairs on stdout")
    model = parser.add_argument_group("the model each arm trains")
    model.add_argument("--model", default=defaults.model, help="model preset or YAML (default: %(default)s)")
    model.add_argument("--tokens", type=positive_int, default=defaults.tokens, help="training tokens per model")
    model.add_argument("--seq-len", type=positive_int, default=defaults.seq_len)
    model.add_argument("--batch-size", type=positive_int, default=defaults.batch_size, help="sequences per step")
    model.add_argument(
        "--micro-batch", type=positive_int, default=defaults.micro_batch_size, help="sequences per forward"
    )
    model.add_argument(
        "--lr",
        type=positive_float,
        help="peak learning rate (default: DeepSeek LLM's law for the model and tokens, as pretrain budget gives it)",
    )
    model.add_argument(
        "--tokenizer",
        help="tokenizer folder (default: the token-shard arms', else one trained on a sample of every arm)",
    )
    model.add_argument(
        "--vocab-size", type=positive_int, default=defaults.vocab_size, help="of the tokenizer trained here"
    )
    model.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    model.add_argument("--text-field", default="text", help="text field of JSONL/Parquet documents")
    tasks = parser.add_argument_group("lm-evaluation-harness tasks (the eval extra)")
    tasks.add_argument(
        "--tasks", help="task names, comma-separated: accuracy and the probability of the correct answer"
    )
    tasks.add_argument("--include-path", help="folder of local task YAML files")
    tasks.add_argument("--limit", type=positive_int, help="at most this many items per task")


def main(args: argparse.Namespace) -> int:
    spec = AblationSpec(
        args.arm,
        args.eval,
        args.output,
        args.seeds,
        args.model,
        args.tokens,
        args.seq_len,
        args.batch_size,
        args.micro_batch,
        args.lr,
        args.tokenizer,
        args.vocab_size,
        [t for t in (args.tasks or "").split(",") if t],
        args.include_path,
        args.limit,
        args.device,
        args.text_field,
    )
    results = run_ablation(spec)
    if args.json:
        print(json.dumps({"output": args.output, "pairs": results["pairs"]}))
        return 0
    for pair in results["pairs"]:
        low, high = pair["ci95"]
        verdict = f"{pair['winner']} wins" if pair["winner"] else "no difference shown"
        print(
            f"{pair['measure']}: {pair['a']} - {pair['b']} = {pair['difference']:+.4f} "
            f"(95% interval {low:+.4f} to {high:+.4f}): {verdict}"
        )
    print(f"results: {args.output}/results.json  page: {args.output}/index.html")
    return 0
