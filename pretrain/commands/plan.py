"""``pretrain plan``: the fastest parallel layout that fits a model on a cluster, and time to train
(the planner: ``pretrain.planning.plan``)."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

from dataprep.core.cli import add_output_argument
from dataprep.core.errors import UsageError
from dataprep.core.storage import check_output_path
from pretrain.components.shard_totals import shard_totals
from pretrain.config import save_yaml
from pretrain.planning.budget import METHODS
from pretrain.planning.checkpoint_interval import WRITE_GBS_PER_NODE, plan_checkpoint_interval
from pretrain.planning.cost import add_cost_arguments, cost_rates, format_comparison, format_cost, plan_cost
from pretrain.planning.plan import plan
from pretrain.planning.plan_inputs import plan_document_tokens, plan_gpu, plan_model, plan_tokens
from pretrain.planning.plan_memory import PRECISIONS
from pretrain.planning.plan_report import format_report
from pretrain.planning.plan_result import train_config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model",
        help="model config YAML, preset (tiny, 125m, 350m, 1b, 3b, 7b) or a parameter count "
        "(70B: shaped by pretrain size)",
    )
    _add_cluster_arguments(parser)
    _add_run_arguments(parser)
    _add_checkpoint_interval_arguments(parser)
    _add_written_config_arguments(parser)
    add_cost_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")


def _add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    cluster = parser.add_argument_group("the cluster")
    cluster.add_argument("--gpus", type=int, default=1, help="number of GPUs (default 1)")
    cluster.add_argument(
        "--gpu", default="h100", help="GPU type: h100, h200, a100-80gb, a100-40gb, l4, ... (default h100)"
    )
    cluster.add_argument("--gpu-memory-gb", type=float, help="override the GPU's memory (GB)")
    cluster.add_argument("--peak-flops", help="override the GPU's peak FLOP/s at --precision, e.g. 989e12")
    cluster.add_argument(
        "--intra-node-gbs", type=float, help="override GB/s per GPU per direction within a node (H100 SXM: 450, NVLink)"
    )
    cluster.add_argument(
        "--inter-node-gbs",
        type=float,
        help="override GB/s per GPU per direction across nodes (H100: 50, one 400 Gb/s InfiniBand NIC per GPU)",
    )
    cluster.add_argument(
        "--compare-gpus",
        metavar="GPU[=PRICE],...",
        help="lay the same model and tokens out on each of these GPUs (the table's names, e.g. "
        "h100,a100-80gb,h200; =PRICE: its price per GPU-hour, else --price-per-gpu-hour) and "
        "print days, GPU-hours and money side by side",
    )
    cluster.add_argument("--gpus-per-node", type=int, help="GPUs per node: the tensor-parallel limit (default 8)")
    cluster.add_argument(
        "--precision",
        choices=list(PRECISIONS),
        default="bf16",
        help="bf16 (default), fp16 (loss scaling; no pipeline stages), tf32 (fp32 weights, TF32 "
        "matmuls) or fp32: memory and the peak FLOP/s the step is timed at (H100: 989, 989, "
        "494.5, 67 TFLOP/s)",
    )
    cluster.add_argument("--mfu", type=float, default=0.4, help="assumed model FLOPs utilisation (default 0.4)")


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    run = parser.add_argument_group("the run")
    run.add_argument("--seq-len", type=int, help="training sequence length (default: the model's max_seq_len)")
    run.add_argument("--micro-batch", type=int, default=4, help="sequences per GPU per forward (default 4)")
    run.add_argument(
        "--global-batch",
        type=int,
        help="sequences per optimizer step (default: DeepSeek LLM's "
        "compute-optimal batch, rounded to a multiple of micro-batch x data-parallel ranks)",
    )
    run.add_argument(
        "--lr",
        type=float,
        help="peak learning rate (default: DeepSeek LLM's compute-optimal one for this model and tokens)",
    )
    run.add_argument(
        "--document-mask",
        nargs="?",
        const="data",
        metavar="MEAN_TOKENS",
        help="attention within documents (data.document_mask): attention FLOPs over each document's "
        "blocks only; the token-weighted mean document length is read from the --data shards, or "
        "given",
    )
    run.add_argument("--tp", type=int, help="also show the memory breakdown at this tensor-parallel degree")
    run.add_argument(
        "--no-sync-accumulation",
        action="store_true",
        help="accumulate gradients unsharded and reduce once per step (less communication; "
        "every GPU then holds the full fp32 gradients)",
    )
    run.add_argument(
        "--max-bubble",
        type=float,
        default=0.1,
        help="pipeline bubble to stay under, interleaving stages if needed (default 0.1)",
    )
    run.add_argument("--tokens", help="tokens to train on, e.g. 140B (default: the --method's D for N)")
    run.add_argument(
        "--epochs",
        type=float,
        help="train on this many passes over the --data shards instead "
        "(tokens = epochs x their manifest's token count; see pretrain budget --data)",
    )
    run.add_argument(
        "--method",
        choices=list(METHODS),
        default="approach1",
        help="scaling law for the default tokens (default approach1)",
    )


def _add_checkpoint_interval_arguments(parser: argparse.ArgumentParser) -> None:
    failures = parser.add_argument_group("checkpoint interval (Young/Daly)")
    failures.add_argument(
        "--mtbf-hours",
        type=float,
        metavar="H",
        help="mean time between failures of one GPU, in hours: print the checkpoint interval that "
        "loses least time (the job's MTBF is H / --gpus) and write it into --output",
    )
    failures.add_argument(
        "--save-seconds",
        type=float,
        help="the blocking time of one save, as measured (default: "
        "estimated from the checkpoint size, see --write-gbs-per-node)",
    )
    failures.add_argument(
        "--save-from",
        metavar="RUN_DIR",
        help="take the save time from a run's metrics (the median blocking_s of its kind: checkpoint records)",
    )
    failures.add_argument(
        "--async-save",
        action="store_true",
        help="saves are asynchronous (only the copy to host memory blocks); --output then sets checkpoint.async_save",
    )
    failures.add_argument(
        "--write-gbs-per-node",
        type=float,
        default=WRITE_GBS_PER_NODE,
        help=f"GB/s each node writes to the checkpoint storage, for the estimated save time "
        f"(default {WRITE_GBS_PER_NODE:g})",
    )


def _add_written_config_arguments(parser: argparse.ArgumentParser) -> None:
    written = parser.add_argument_group("the training config it writes")
    add_output_argument(
        written,
        old=("--out",),
        metavar="FILE",
        help="write the chosen layout as a training config YAML for pretrain train",
    )
    written.add_argument("--data", action="append", help="token-shard directory for --output (repeatable)")
    written.add_argument("--run-dir", default="runs/plan", help="out_dir of the emitted training config")


def main(args: argparse.Namespace) -> int:
    cfg = plan_model(args.model, args.seq_len)
    gpu = plan_gpu(
        args.gpu, args.precision, args.gpu_memory_gb, args.peak_flops, args.intra_node_gbs, args.inter_node_gbs
    )
    if args.output and not args.data:
        raise UsageError("--output needs --data: the token-shard directory the training config reads")
    if args.output:
        check_output_path(args.output, "--output", folder=False)
    # the shards' manifests (when the shards exist yet): the model's vocabulary must be their tokenizer's,
    # and their token count is the unique tokens the target repeats
    corpus = shard_totals(args.data, required=False) if args.data else None
    if corpus:
        cfg = cfg.model_copy(update={"vocab_size": corpus["vocab_size"]})
    unique = corpus["tokens"] if corpus else None
    tokens, source = plan_tokens(args.tokens, args.epochs, unique)

    document_tokens = plan_document_tokens(args.document_mask, args.data)

    def plan_on(gpu):
        return plan(
            cfg,
            gpus=args.gpus,
            gpu=gpu,
            seq_len=args.seq_len,
            micro_batch=args.micro_batch,
            global_batch=args.global_batch,
            precision=args.precision,
            mfu=args.mfu,
            tokens=tokens,
            gpus_per_node=args.gpus_per_node,
            show_tp=args.tp,
            method=args.method,
            tokens_source=source,
            unique_tokens=unique,
            no_sync=args.no_sync_accumulation,
            max_bubble=args.max_bubble,
            lr=args.lr,
            document_tokens=document_tokens,
        )

    if args.compare_gpus:
        return _compare(args, plan_on)
    result = plan_on(gpu)
    rates = cost_rates(args, None if args.peak_flops else gpu.board_power_w)
    result["cost"] = plan_cost(result["time"]["days"], args.gpus, rates)
    if args.mtbf_hours is not None:
        result["checkpoint_interval"] = plan_checkpoint_interval(
            result,
            args.mtbf_hours,
            save_seconds=args.save_seconds,
            save_from=args.save_from,
            async_save=args.async_save,
            write_gbs_per_node=args.write_gbs_per_node,
        )
    if args.output:
        save_yaml(train_config(result, cfg, args.data, args.run_dir), args.output)
        result["written"] = args.output
    print(json.dumps(result, indent=2) if args.json else format_report(result, (format_cost(result["cost"], rates),)))
    return 0


def _compare(args: argparse.Namespace, plan_on) -> int:
    """The same model and tokens planned on each GPU of --compare-gpus, side by side."""
    fixed = [
        flag
        for flag, value in (
            ("--output", args.output),
            ("--mtbf-hours", args.mtbf_hours),
            ("--peak-flops", args.peak_flops),
            ("--gpu-memory-gb", args.gpu_memory_gb),
            ("--intra-node-gbs", args.intra_node_gbs),
            ("--inter-node-gbs", args.inter_node_gbs),
        )
        if value is not None
    ]
    if fixed:
        raise UsageError(
            f"--compare-gpus plans each GPU at its table's figures and writes nothing: drop {', '.join(fixed)}"
        )
    rows = []
    for name, price in compare_list(args.compare_gpus):
        gpu = plan_gpu(name, args.precision)
        rates = cost_rates(args, gpu.board_power_w)
        if price is not None:
            rates = replace(rates, price_per_gpu_hour=price)
        try:
            result = plan_on(gpu)
        except ValueError as exc:  # the model does not fit these GPUs: a row that says so
            rows.append({"gpu": name, "error": str(exc)})
            continue
        t = result["time"]
        rows.append(
            {
                "gpu": name,
                "layout": result["layout"]["name"],
                "step_seconds": t["step_seconds"],
                "days": t["days"],
                "tokens": t["target_tokens"],
                "price_per_gpu_hour": rates.price_per_gpu_hour,
                "cost": plan_cost(t["days"], args.gpus, rates),
            }
        )
    print(
        json.dumps({"gpus": args.gpus, "compare": rows}, indent=2) if args.json else format_comparison(rows, args.gpus)
    )
    return 0


def compare_list(text: str) -> list[tuple[str, float | None]]:
    """``h100=2.5,a100-80gb,h200`` as (name, price or None) pairs."""
    pairs = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, price = item.partition("=")
        try:
            value = float(price) if price else None
        except ValueError:
            raise UsageError(f"--compare-gpus {item!r}: the price after '=' is not a number") from None
        if value is not None and not value > 0:
            raise UsageError(f"--compare-gpus {item!r}: the price must be positive")
        pairs.append((name.strip(), value))
    if not pairs:
        raise UsageError("--compare-gpus names no GPU")
    return pairs
