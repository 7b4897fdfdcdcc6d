"""``pretrain plan``: the fastest parallel layout that fits a model on a cluster, and time to train
(the planner: ``pretrain.planning.plan``)."""

from __future__ import annotations

import json

from pretrain.planning.budget import METHODS, parse_number, positive
from pretrain.planning.checkpoint_interval import (
    WRITE_GBS_PER_NODE,
    checkpoint_interval,
    estimated_save_seconds,
    measured_save_seconds,
)
from pretrain.planning.hardware import get_gpu
from pretrain.planning.plan import plan, train_config
from pretrain.planning.plan_memory import PRECISIONS
from pretrain.planning.plan_report import format_report


def add_arguments(parser) -> None:
    parser.add_argument("model", help="model config YAML, preset (tiny, 125m, 350m, 1b, 3b, 7b) or a parameter count "
                        "(70B: shaped by pretrain size)")
    parser.add_argument("--gpus", type=int, default=1, help="number of GPUs (default 1)")
    parser.add_argument("--gpu", default="h100", help="GPU type: h100, h200, a100-80gb, a100-40gb, l4, ... "
                        "(default h100)")
    parser.add_argument("--gpu-memory-gb", type=float, help="override the GPU's memory (GB)")
    parser.add_argument("--peak-flops", help="override the GPU's peak FLOP/s at --precision, e.g. 989e12")
    parser.add_argument("--intra-node-gbs", type=float, help="override GB/s per GPU per direction within a node "
                        "(H100 SXM: 450, NVLink)")
    parser.add_argument("--inter-node-gbs", type=float, help="override GB/s per GPU per direction across nodes "
                        "(H100: 50, one 400 Gb/s InfiniBand NIC per GPU)")
    parser.add_argument("--gpus-per-node", type=int, help="GPUs per node: the tensor-parallel limit (default 8)")
    parser.add_argument("--seq-len", type=int, help="training sequence length (default: the model's max_seq_len)")
    parser.add_argument("--micro-batch", type=int, default=4, help="sequences per GPU per forward (default 4)")
    parser.add_argument("--global-batch", type=int, help="sequences per optimizer step (default: DeepSeek LLM's "
                        "compute-optimal batch, rounded to a multiple of micro-batch x data-parallel ranks)")
    parser.add_argument("--lr", type=float, help="peak learning rate (default: DeepSeek LLM's compute-optimal one for "
                        "this model and tokens)")
    parser.add_argument("--tp", type=int, help="also show the memory breakdown at this tensor-parallel degree")
    parser.add_argument("--precision", choices=list(PRECISIONS), default="bf16",
                        help="bf16 (default), fp16 (loss scaling; no pipeline stages), tf32 (fp32 weights, TF32 "
                             "matmuls) or fp32: memory and the peak FLOP/s the step is timed at (H100: 989, 989, "
                             "494.5, 67 TFLOP/s)")
    parser.add_argument("--no-sync-accumulation", action="store_true",
                        help="accumulate gradients unsharded and reduce once per step (less communication; "
                             "every GPU then holds the full fp32 gradients)")
    parser.add_argument("--max-bubble", type=float, default=0.1,
                        help="pipeline bubble to stay under, interleaving stages if needed (default 0.1)")
    parser.add_argument("--mfu", type=float, default=0.4, help="assumed model FLOPs utilisation (default 0.4)")
    parser.add_argument("--tokens", help="tokens to train on, e.g. 140B (default: the --method's D for N)")
    parser.add_argument("--epochs", type=float, help="train on this many passes over the --data shards instead "
                        "(tokens = epochs x their manifest's token count; see pretrain budget --data)")
    parser.add_argument("--method", choices=list(METHODS), default="approach1",
                        help="scaling law for the default tokens (default approach1)")
    parser.add_argument("--mtbf-hours", type=float, metavar="H",
                        help="mean time between failures of one GPU, in hours: print the checkpoint interval that "
                             "loses least time (Young/Daly, the job's MTBF is H / --gpus) and write it into --out")
    parser.add_argument("--save-seconds", type=float, help="with --mtbf-hours: the blocking time of one save, as "
                        "measured (default: estimated from the checkpoint size, see --write-gbs-per-node)")
    parser.add_argument("--save-from", metavar="RUN_DIR", help="with --mtbf-hours: take the save time from a run's "
                        "metrics (the median blocking_s of its kind: checkpoint records)")
    parser.add_argument("--async-save", action="store_true", help="with --mtbf-hours: saves are asynchronous (only "
                        "the copy to host memory blocks); --out then sets checkpoint.async_save")
    parser.add_argument("--write-gbs-per-node", type=float, default=WRITE_GBS_PER_NODE,
                        help=f"with --mtbf-hours: GB/s each node writes to the checkpoint storage, for the "
                             f"estimated save time (default {WRITE_GBS_PER_NODE:g})")
    parser.add_argument("--out", help="write the chosen layout as a training config YAML for pretrain train")
    parser.add_argument("--data", action="append", help="token-shard directory for --out (repeatable)")
    parser.add_argument("--run-dir", default="runs/plan", help="out_dir of the emitted training config")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")


def main(args) -> int:
    from dataclasses import replace

    from dataprep.core.storage import check_output_path
    from pretrain.config import ConfigError, save_yaml
    from pretrain.planning.data_constrained import read_corpus
    from pretrain.planning.sizing import PRESET_SIZES, resolve_model

    try:
        cfg = resolve_model(args.model)
    except ConfigError:  # a model YAML that is missing or does not validate: its own message
        raise
    except ValueError:  # not a preset: a parameter count, shaped as pretrain size would
        from pretrain.planning.sizing import size_model

        try:
            params = parse_number(args.model)
        except ValueError:
            raise ValueError(f"model {args.model!r} is not a model config YAML, a preset (tiny, "
                             f"{', '.join(PRESET_SIZES)}) or a parameter count such as 1.3B") from None
        cfg = size_model(params)
        if args.seq_len:
            cfg = cfg.model_copy(update={"max_seq_len": max(cfg.max_seq_len, args.seq_len)})
    gpu = get_gpu(args.gpu)
    if args.gpu_memory_gb is not None:
        gpu = replace(gpu, memory_gb=args.gpu_memory_gb)
    if args.peak_flops is not None:
        gpu = gpu.with_peak(args.precision, positive(parse_number(args.peak_flops), "--peak-flops"))
    for flag in ("intra_node_gbs", "inter_node_gbs"):
        if getattr(args, flag) is not None:
            if not getattr(args, flag) > 0:
                raise ValueError(f"--{flag.replace('_', '-')} must be positive")
            gpu = replace(gpu, **{flag: getattr(args, flag)})
    if args.out and not args.data:
        raise ValueError("--out needs --data: the token-shard directory the training config reads")
    if args.out:
        check_output_path(args.out, "--out", folder=False)
    # the shards' manifests (when the shards exist yet): the model's vocabulary must be their tokenizer's,
    # and their token count is the unique tokens the target repeats
    corpus = read_corpus(args.data, required=False) if args.data else None
    if corpus:
        cfg = cfg.model_copy(update={"vocab_size": corpus["vocab_size"]})
    unique = corpus["tokens"] if corpus else None
    tokens, source = (parse_number(args.tokens) if args.tokens else None), "given"
    if args.epochs is not None:
        if args.tokens or unique is None or not args.epochs > 0:
            raise ValueError("--epochs needs --data shards with a manifest, a positive count, and no --tokens")
        tokens, source = args.epochs * unique, f"{args.epochs:g} epochs of the data"
    result = plan(cfg, gpus=args.gpus, gpu=gpu, seq_len=args.seq_len, micro_batch=args.micro_batch,
                  global_batch=args.global_batch, precision=args.precision, mfu=args.mfu, tokens=tokens,
                  gpus_per_node=args.gpus_per_node, show_tp=args.tp, method=args.method, tokens_source=source,
                  unique_tokens=unique, no_sync=args.no_sync_accumulation, max_bubble=args.max_bubble, lr=args.lr)
    if args.mtbf_hours is not None:
        result["checkpoint_interval"] = plan_checkpoint_interval(
            result, args.mtbf_hours, save_seconds=args.save_seconds, save_from=args.save_from,
            async_save=args.async_save, write_gbs_per_node=args.write_gbs_per_node)
    if args.out:
        save_yaml(train_config(result, cfg, args.data, args.run_dir), args.out)
        result["written"] = args.out
    print(json.dumps(result, indent=2) if args.json else format_report(result))
    return 0


def plan_checkpoint_interval(result: dict, mtbf_hours: float, *, save_seconds: float | None = None,
                             save_from: str | None = None, async_save: bool = False,
                             write_gbs_per_node: float = WRITE_GBS_PER_NODE) -> dict:
    """Young/Daly's checkpoint interval for the planned job: the save time given, measured by a run, or
    estimated from the checkpoint size; in the planned step time."""
    if save_seconds is not None and save_from:
        raise ValueError("--save-seconds and --save-from both give the save time: pass one")
    if not write_gbs_per_node > 0:
        raise ValueError("--write-gbs-per-node must be positive")
    gpus = result["cluster"]["gpus"]
    if save_seconds is not None:
        save, source = save_seconds, "given"
    elif save_from:
        save, source = measured_save_seconds(save_from), f"measured in {save_from}"
    else:
        save = estimated_save_seconds(result["model"]["params"], gpus, result["cluster"]["gpus_per_node"], async_save,
                                      write_gbs_per_node)
        source = ("estimated: each GPU's shard copied to host memory (async save)" if async_save else
                  f"estimated: {result['model']['params'] * 12 / 1e9:.0f} GB at {write_gbs_per_node:g} GB/s per node")
    interval = checkpoint_interval(save, mtbf_hours, gpus, result["time"]["step_seconds"])
    return interval | {"save_from": source, "async_save": async_save}
