"""``pretrain budget``: compute-optimal N and D for a budget, a corpus and an inference load
(``pretrain.planning.budget_answer``; its text: ``pretrain.planning.budget_report``)."""

from __future__ import annotations

import argparse
import json
from dataclasses import fields

from dataprep.core.errors import UsageError
from pretrain.planning.budget import FITS, METHODS
from pretrain.planning.budget_answer import budget_answer
from pretrain.planning.budget_inputs import ALLOCATION_FITS, BudgetQuestion
from pretrain.planning.budget_report import format_report
from pretrain.planning.cost import add_cost_arguments, cost_rates, format_cost, run_cost


def add_arguments(parser: argparse.ArgumentParser) -> None:
    given = parser.add_argument_group("what to size (give one)")
    corpus = parser.add_argument_group("the corpus (repeated data)")
    answer = parser.add_argument_group("the answer")
    given.add_argument("--compute", help="training compute in FLOPs, e.g. 1e21 or 5.76e23")
    given.add_argument("--gpus", type=int, help="GPU count (with --hours)")
    given.add_argument("--hours", type=float, help="wall-clock hours (with --gpus)")
    given.add_argument("--gpu", default="h100", help="GPU type for peak FLOP/s (default h100; see pretrain plan)")
    given.add_argument("--peak-flops", help="peak bf16 FLOP/s per GPU, overrides --gpu (e.g. 989e12)")
    given.add_argument("--mfu", type=float, default=0.4, help="assumed model FLOPs utilisation (default 0.4)")
    given.add_argument("--params", help="model size N, e.g. 1.3B: gives D")
    given.add_argument("--tokens", help="token count D, e.g. 300B: gives N (with --model: the run's tokens)")
    given.add_argument(
        "--model",
        help="model config YAML or preset (tiny, 125m, ..., 7b): N from it, plus FLOPs; "
        "with --tokens, a fixed run: its C, learning rate and batch",
    )
    given.add_argument(
        "--seq-len",
        type=int,
        help="the run's sequence length: Appendix F and DeepSeek FLOPs, batch "
        "in sequences (default: the model's, else 2048)",
    )
    answer.add_argument(
        "--method", action="append", choices=list(METHODS), help="method(s) to show (repeatable; default all)"
    )
    corpus.add_argument(
        "--data",
        action="append",
        help="token-shard directory: its manifest's token count is the "
        "corpus's unique tokens U (repeatable; with --model, also the vocabulary); or one mixture "
        "preset or file (llama1, web_wiki.yaml): also each source's epochs at its share of D",
    )
    corpus.add_argument("--unique-tokens", help="unique tokens U of the corpus, e.g. 300B (instead of --data)")
    corpus.add_argument("--epochs", type=float, help="evaluate this many passes over the corpus (D = epochs x U)")
    answer.add_argument(
        "--fit",
        choices=FITS + ALLOCATION_FITS,
        default="approach3",
        help="the answer the learning rate and batch are sized for, and the loss fit of the "
        "data-constrained and inference-aware answers, which deepseek lacks (default approach3)",
    )
    answer.add_argument(
        "--inference-tokens",
        help="tokens the model will serve over its life, e.g. 2T: the N and D "
        "of least training + inference FLOPs for the same loss",
    )
    add_cost_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def main(args: argparse.Namespace) -> int:
    result = budget_answer(BudgetQuestion(**{f.name: getattr(args, f.name) for f in fields(BudgetQuestion)}))
    text = format_report(result)
    if args.gpus is not None:  # budget_answer has checked that --hours came with it
        from pretrain.planning.hardware import get_gpu

        rates = cost_rates(args, None if args.peak_flops else get_gpu(args.gpu).board_power_w)
        result["cost"] = run_cost(args.gpus * args.hours, rates)
        text += "\n\n" + format_cost(result["cost"], rates)
    elif any(getattr(args, k) is not None for k in ("price_per_gpu_hour", "gpu_power_w", "grid_gco2_per_kwh")):
        raise UsageError("the cost flags need --gpus and --hours: the GPU-hours they price")
    print(json.dumps(result, indent=2) if args.json else text)
    return 0
