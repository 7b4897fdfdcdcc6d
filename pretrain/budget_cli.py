"""``pretrain budget``: compute-optimal N and D for a budget, every Chinchilla method side by side.

Give one of: --compute FLOPs; --gpus/--hours with --gpu (or --peak-flops) and --mfu; --params N;
--tokens D; or --model CONFIG (N = its exact parameter count, and the Appendix F FLOPs of that
architecture are shown next to 6ND).
"""

from __future__ import annotations

import json

from dataprep.units import human
from pretrain.budget import METHODS, compute_from_gpus, estimate, parse_number


def add_arguments(parser) -> None:
    parser.add_argument("--compute", help="training compute in FLOPs, e.g. 1e21 or 5.76e23")
    parser.add_argument("--gpus", type=int, help="GPU count (with --hours)")
    parser.add_argument("--hours", type=float, help="wall-clock hours (with --gpus)")
    parser.add_argument("--gpu", default="h100", help="GPU type for peak FLOP/s (default h100; see pretrain plan)")
    parser.add_argument("--peak-flops", help="peak bf16 FLOP/s per GPU, overrides --gpu (e.g. 989e12)")
    parser.add_argument("--mfu", type=float, default=0.4, help="assumed model FLOPs utilisation (default 0.4)")
    parser.add_argument("--params", help="model size N, e.g. 1.3B: gives D")
    parser.add_argument("--tokens", help="token count D, e.g. 300B: gives N")
    parser.add_argument("--model", help="model config YAML or preset (tiny, 125m, ..., 7b): N from it, plus FLOPs")
    parser.add_argument("--seq-len", type=int, help="sequence length for the Appendix F count (default: model's)")
    parser.add_argument("--method", action="append", choices=list(METHODS),
                        help="method(s) to show (repeatable; default all)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _budget_input(args) -> tuple[dict, str]:
    """The one given quantity as estimate() keyword arguments, and a line saying where it came from."""
    if args.gpus is not None or args.hours is not None:
        if args.gpus is None or args.hours is None:
            raise ValueError("--gpus and --hours go together")
        from pretrain.hardware import get_gpu

        peak = parse_number(args.peak_flops) if args.peak_flops else get_gpu(args.gpu).peak_flops_bf16
        c = compute_from_gpus(args.gpus, args.hours, peak, args.mfu)
        source = f"C = {args.gpus} GPUs x {args.hours:g} h x {peak:.3g} FLOP/s x MFU {args.mfu:g} = {c:.3g} FLOPs"
        return {"compute": c}, source
    given = {k: getattr(args, k) for k in ("compute", "params", "tokens") if getattr(args, k) is not None}
    if len(given) > 1:
        raise ValueError("give only one of --compute, --params, --tokens, --gpus/--hours")
    if not given:
        raise ValueError("give one of --compute, --gpus/--hours, --params, --tokens or --model")
    (key, text), = given.items()
    value = parse_number(text)
    return {key: value}, f"given {key} = {value:.4g}"


def run(args) -> dict:
    model = None
    if args.model:
        from pretrain.model import num_params
        from pretrain.sizing import resolve_model

        if any(getattr(args, k) is not None for k in ("compute", "params", "tokens", "gpus", "hours")):
            raise ValueError("--model fixes N; do not combine it with --compute, --params, --tokens or --gpus/--hours")
        model = resolve_model(args.model)
        n = num_params(model)
        kwargs, source = {"params": float(n)}, f"N = {n:,} parameters of {args.model}"
    else:
        kwargs, source = _budget_input(args)
    rows = [estimate(m, **kwargs) for m in (args.method or list(METHODS))]
    result = {"input": source, "estimates": [r.to_dict() | {"label": METHODS[r.method].name} for r in rows]}
    if model is not None:
        from pretrain.flops import compare

        seq = args.seq_len or model.max_seq_len
        for row in result["estimates"]:
            # the architecture fixes N; D follows from each method's budget for it
            row["flops_for_model"] = compare(model, row["tokens"], seq)
    return result


def main(args) -> int:
    result = run(args)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(result["input"])
    header = f"{'method':<38} {'N':>8} {'D':>8} {'D/N':>6} {'C (6ND)':>9} {'loss':>6}"
    if "flops_for_model" in result["estimates"][0]:
        header += f" {'App. F C':>9} {'F/6ND':>6}"
    print(header)
    for row in result["estimates"]:
        loss = f"{row['loss']:.3f}" if row["loss"] is not None else "-"
        line = (f"{row['label']:<38} {human(row['params']):>8} {human(row['tokens']):>8} "
                f"{row['tokens_per_param']:>6.1f} {row['flops']:>9.3g} {loss:>6}")
        if "flops_for_model" in row:
            f = row["flops_for_model"]
            line += f" {f['appendix_f']:>9.3g} {f['ratio']:>6.3f}"
        print(line)
    notes = {r["label"]: r["note"] for r in result["estimates"] if r["note"]}
    for label, note in notes.items():
        print(f"  {label}: {note}")
    return 0
