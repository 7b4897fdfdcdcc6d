"""Training on one accelerator: tokens/s, MFU, peak memory against the planner, and where a step's time goes.

Trains model presets for a fixed number of steps, on whatever device it finds, with the training loop's own
parts (``pretrain.train``: ``build_parallel_model``, ``build_optimizer``, ``TrainStepContext``,
``accumulate_gradients``, ``optimizer_step``). Every option takes several values; the bench runs every
combination of them, one case after another, and writes one JSON (rewritten after each case, so a run
cut short keeps what it measured) and a table.

- MFU = tokens/s x flops_per_token / peak, with ``pretrain.planning.flops.flops_per_token`` (6 N_non-embedding +
  12 L H Q T, PaLM appendix B: recomputation is not counted) and the device's dense bf16 peak from
  ``pretrain.planning.hardware`` (also for fp32 runs, which are measured against the same peak).
- Memory: ``torch.cuda.max_memory_allocated`` over the case against ``pretrain.planning.plan_memory.layout_memory``
  for the same model, sequence, micro-batch, precision and checkpointing on one GPU (what ``pretrain plan`` prints).
- Step breakdown (medians over the timed steps): host time to produce the step's micro-batches (data),
  forward + backward (``accumulate_gradients``), optimizer (``optimizer_step``: clip, AdamW, scheduler)
  timed with CUDA events (no host sync inside a step), and the rest of the wall-clock step (other).

    python -m bench.gpu.bench_gpu                                      # 125m 350m 1b, the device's defaults
    python -m bench.gpu.bench_gpu --models 1b --compile off on --adamw fused foreach
    python -m bench.gpu.bench_gpu --models 1b --checkpointing none selective block --fsdp off on
    python -m bench.gpu.bench_gpu --smoke                              # CPU check: tiny preset, two steps
    bash bench/gpu/gpu_run.sh                                          # the whole GPU matrix (docs/gpu.md)
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import itertools
import json
import math
import os
import platform
import statistics
import sys
import time
import traceback
from dataclasses import asdict, dataclass

import torch
import torch.distributed as dist

from bench.common.paths import ROOT
from dataprep.core.storage import atomic_write_text
from pretrain.components.dataloader import build_loaders
from pretrain.components.device import resolve_device, resolve_precision
from pretrain.components.optimizer import build_optimizer, lr_factor
from pretrain.config import TrainConfig
from pretrain.distributed.parallel_dims import ParallelDims
from pretrain.models.llama import num_params
from pretrain.planning.flops import flops_per_token
from pretrain.planning.hardware import GPUS, match_device
from pretrain.planning.plan_memory import GB, layout_memory
from pretrain.planning.sizing import resolve_model
from pretrain.train import build_parallel_model
from pretrain.train_step import TrainStepContext, accumulate_gradients, optimizer_step

MFU_FORMULA = (
    "mfu = tokens_per_s * flops_per_token / peak_flops; flops_per_token = 6 * N_non_embedding + "
    "12 * n_layers * n_heads * head_dim * seq_len (pretrain.planning.flops.flops_per_token)"
)
POOL_LIMIT = 2048  # synthetic sequences generated before timing; longer runs cycle through them


def mfu(tokens_per_s: float, flops_per_token_: float, peak_flops: float | None) -> float | None:
    """Model FLOPs utilisation: the model FLOP/s achieved over the device's peak (None without a peak)."""
    return tokens_per_s * flops_per_token_ / peak_flops if peak_flops else None


@dataclass(frozen=True)
class Case:
    model: str
    precision: str  # bf16, fp32, tf32, fp16
    compile: bool
    checkpointing: str  # none, selective, block (the training config's names)
    adamw: str  # fused or foreach
    fsdp: bool  # FSDP2 over a one-rank mesh, or the bare model
    attention: str = "default"  # SDPA kernel: default (torch's choice), flash, efficient, cudnn or math


SDPA_KERNELS = {
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
    "math": "MATH",
}


def attention_kernels(name: str):
    """A context in which SDPA may use only the kernel ``name``; ``all``: every kernel allowed again (torch's
    own choice), and on exit torch's flags as they were (the training context may change them)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    names = SDPA_KERNELS.values() if name == "all" else [SDPA_KERNELS[name]]
    return sdpa_kernel([getattr(SDPBackend, n) for n in names])


def chosen_attention_kernel(cfg: TrainConfig, device: torch.device, precision: str) -> str:
    """The SDPA kernel torch's dispatcher picks for this case's attention shapes (under the current
    ``attention_kernels`` context)."""
    from torch.nn.attention import SDPBackend

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
    m = cfg.model
    q = torch.empty(cfg.micro_batch_size, m.n_heads, cfg.seq_len, m.head_dim, device=device, dtype=dtype)
    kv = torch.empty(cfg.micro_batch_size, m.n_kv_heads, cfg.seq_len, m.head_dim, device=device, dtype=dtype)
    try:
        choice = torch._fused_sdp_choice(q, kv, kv, is_causal=True, enable_gqa=m.n_kv_heads != m.n_heads)
        return SDPBackend(choice).name.lower()
    except Exception as exc:  # a private API: report rather than fail the case
        return f"unknown ({type(exc).__name__})"


def parallel_dims(fsdp: bool, device: torch.device) -> ParallelDims:
    if not fsdp:
        return ParallelDims(dp_shard=1, tp=1, world_size=1)
    if not dist.is_initialized():
        dist.init_process_group(
            "nccl" if device.type == "cuda" else "gloo", store=dist.HashStore(), rank=0, world_size=1
        )
    dims = ParallelDims(dp_shard=1, tp=1, world_size=1, single_rank_fsdp=True)
    dims.build_mesh(device.type)
    return dims


def adamw(model: torch.nn.Module, cfg: TrainConfig, kind: str) -> torch.optim.AdamW:
    """The training loop's AdamW (its parameter groups and hyperparameters) with the implementation asked
    for: ``fused`` (one kernel) or ``foreach`` (multi-tensor ops)."""
    built = build_optimizer(model, cfg.optim)
    # every group carries every hyperparameter; only the implementation flags come from the constructor
    groups = [{k: v for k, v in g.items() if k not in ("fused", "foreach")} for g in built.param_groups]
    return torch.optim.AdamW(groups, fused=kind == "fused", foreach=kind == "foreach")


def synthetic_tokens(n_seqs: int, length: int, vocab: int, seed: int = 0) -> torch.Tensor:
    """Sequences drawn from a fixed random bigram table (four successors per token): learnable, so loss
    curves mean something, and made before timing starts."""
    gen = torch.Generator().manual_seed(seed)
    table = torch.randint(1, vocab, (vocab, 4), generator=gen)
    choice = torch.randint(0, 4, (n_seqs, length), generator=gen)
    out = torch.empty(n_seqs, length, dtype=torch.long)
    out[:, 0] = torch.randint(1, vocab, (n_seqs,), generator=gen)
    for t in range(1, length):
        out[:, t] = table[out[:, t - 1], choice[:, t]]
    return out


class Batches:
    """A step's micro-batches: from token shards through the training loader, or from a synthetic pool."""

    def __init__(self, cfg: TrainConfig, data: str | None, steps: int):
        self.micro, self.accum = cfg.micro_batch_size, cfg.global_batch_size // cfg.micro_batch_size
        if data:
            self.loader, _ = build_loaders(
                cfg.data, cfg.seq_len, cfg.global_batch_size, cfg.micro_batch_size, 0, 1, cfg.model.vocab_size
            )
        else:
            self.loader = None
            n = min(POOL_LIMIT, steps * cfg.global_batch_size)
            self.pool = synthetic_tokens(n, cfg.seq_len + 1, cfg.model.vocab_size, cfg.seed)
            self.position = 0

    def next_step(self) -> list[torch.Tensor]:
        if self.loader is not None:
            return self.loader.next_step()
        out = []
        for _ in range(self.accum):
            if self.position + self.micro > len(self.pool):
                self.position = 0
            out.append(self.pool[self.position : self.position + self.micro])
            self.position += self.micro
        return out


class PhaseClock:
    """Marks between the phases of a step: CUDA events on a GPU (no host sync inside a step), the wall
    clock on a CPU (where every op finishes before the next starts)."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def mark(self):
        if not self.cuda:
            return time.perf_counter()
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def seconds(self, start, end) -> float:
        return start.elapsed_time(end) / 1e3 if self.cuda else end - start


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_config(case: Case, args, device: torch.device) -> TrainConfig:
    micro, accum = args.micro_batch, args.grad_accum
    return TrainConfig.model_validate(
        {
            "model": resolve_model(case.model).model_dump(),
            # read only with --data; the synthetic pool needs no path
            "data": {"sources": [{"path": args.data or "synthetic"}], "val_fraction": 0.0},
            "seq_len": args.seq_len,
            "micro_batch_size": micro,
            "global_batch_size": micro * accum,
            "max_steps": args.steps,
            "precision": case.precision,
            "device": device.type,
            "parallel": {"activation_checkpointing": case.checkpointing, "compile": case.compile},
            "optim": {"lr": args.lr, "warmup_steps": max(1, args.steps // 10)},
        }
    )


def predicted_memory(cfg: TrainConfig, case: Case) -> dict[str, float]:
    """``pretrain plan``'s per-GPU bytes for this case on one GPU."""
    return layout_memory(
        cfg.model,
        "zero3" if case.fsdp else "ddp",
        1,
        case.checkpointing,
        gpus=1,
        seq_len=cfg.seq_len,
        micro_batch=cfg.micro_batch_size,
        precision=case.precision,
        grad_accum=cfg.global_batch_size // cfg.micro_batch_size,
        fsdp=case.fsdp,
        compiled=case.compile,
    )


def describe(case: Case, cfg: TrainConfig, args) -> dict:
    """A case's options, shape, FLOPs per token and the planner's memory prediction (known before training)."""
    predicted = predicted_memory(cfg, case)
    return {
        **asdict(case),
        "params": num_params(cfg.model),
        "non_embedding_params": num_params(cfg.model, exclude_embedding=True),
        "seq_len": cfg.seq_len,
        "micro_batch": cfg.micro_batch_size,
        "grad_accum": cfg.global_batch_size // cfg.micro_batch_size,
        "tokens_per_step": cfg.global_batch_size * cfg.seq_len,
        "steps": args.steps,
        "warmup": args.warmup,
        "data": args.data or "synthetic",
        "flops_per_token": flops_per_token(cfg.model, cfg.seq_len),
        "predicted_memory_gb": predicted["total"] / GB,
        "predicted_breakdown_gb": {k: v / GB for k, v in predicted.items() if k != "total"},
    }


def run_case(case: Case, cfg: TrainConfig, args, device: torch.device, peak_flops: float | None) -> dict:
    """Train ``args.steps`` steps of one case; time the steps after ``args.warmup``."""
    with attention_kernels("all"):
        return _train_case(case, cfg, args, device, peak_flops)


def _train_case(case: Case, cfg: TrainConfig, args, device: torch.device, peak_flops: float | None) -> dict:
    torch.manual_seed(cfg.seed)
    result = {}
    batches = Batches(cfg, args.data, args.steps)
    if device.type == "cuda":
        result["baseline_memory_gb"] = torch.cuda.memory_allocated(device) / GB
        torch.cuda.reset_peak_memory_stats(device)
    dims = parallel_dims(case.fsdp, device)
    model = build_parallel_model(cfg, dims, device, case.precision)
    optimizer = adamw(model, cfg, case.adamw)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, args.steps, cfg.optim))
    ctx = TrainStepContext(device, case.precision, loss_parallel=False, fsdp=dims.fsdp_enabled)
    # an explicit --attention overrides what the training context chose
    kernels = attention_kernels(case.attention) if case.attention != "default" else contextlib.nullcontext()
    with kernels:
        result["attention_kernel"] = chosen_attention_kernel(cfg, device, case.precision)
        _train_steps(model, optimizer, scheduler, ctx, batches, cfg, args, device, peak_flops, result)
    if device.type == "cuda":
        result["peak_memory_gb"] = torch.cuda.max_memory_allocated(device) / GB
        result["peak_reserved_gb"] = torch.cuda.max_memory_reserved(device) / GB
        result["predicted_over_measured"] = predicted_memory(cfg, case)["total"] / GB / result["peak_memory_gb"]
    else:
        result["peak_memory_gb"] = None  # no allocator statistics on a CPU
    return result


def _train_steps(model, optimizer, scheduler, ctx, batches, cfg, args, device, peak_flops, result) -> None:
    """The timed loop: tokens/s, MFU, the step breakdown, every step's loss and gradient norm into ``result``."""
    clock = PhaseClock(device)
    losses, norms, marks, data_s = [], [], [], []
    for step in range(args.steps):
        if step == args.warmup:
            sync(device)
            t0 = time.perf_counter()
        start = time.perf_counter()
        micro_batches = batches.next_step()
        data_s.append(time.perf_counter() - start)
        m0 = clock.mark()
        losses.append(accumulate_gradients(model, micro_batches, ctx))
        m1 = clock.mark()
        norms.append(optimizer_step(optimizer, scheduler, ctx, cfg.optim.grad_clip)[0])
        marks.append((m0, m1, clock.mark()))
    sync(device)
    timed = args.steps - args.warmup
    wall = time.perf_counter() - t0
    step_s = wall / timed
    fwd_bwd = statistics.median(clock.seconds(a, b) for a, b, _ in marks[args.warmup :])
    opt = statistics.median(clock.seconds(b, c) for _, b, c in marks[args.warmup :])
    data = statistics.median(data_s[args.warmup :])
    result["tokens_per_s"] = cfg.global_batch_size * cfg.seq_len * timed / wall
    result["mfu"] = mfu(result["tokens_per_s"], flops_per_token(cfg.model, cfg.seq_len), peak_flops)
    result["step_s"] = step_s
    result["breakdown_s"] = {
        "data": data,
        "forward_backward": fwd_bwd,
        "optimizer": opt,
        "other": max(0.0, step_s - data - fwd_bwd - opt),
    }
    result["losses"] = [float(x) for x in torch.stack(losses).cpu()]
    result["grad_norms"] = [float(x) for x in torch.stack(norms).cpu()]  # fp16: nan/inf where a step was skipped
    result["skipped_steps"] = sum(not math.isfinite(x) for x in result["grad_norms"])
    result["finite"] = all(math.isfinite(x) for x in result["losses"])
    if ctx.scaler is not None:
        result["loss_scale"] = float(ctx.scaler.get_scale())


def release(device: torch.device) -> None:
    """Free the last case's memory before the next one is measured."""
    gc.collect()
    torch._dynamo.reset()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def device_info(device: torch.device, peak_override: float | None) -> dict:
    """Name, memory and the peak MFU is measured against, and where that peak comes from."""
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        name, memory = props.name, props.total_memory
        spec = match_device(name)
    else:
        name, memory, spec = platform.processor() or platform.machine(), None, GPUS["cpu"]
    peak, source = (
        (spec.peak_flops_bf16, f"pretrain/planning/hardware.py: {spec.name}") if spec else (None, "unknown device")
    )
    if peak_override:
        peak, source = peak_override, "--peak-flops"
    return {"type": device.type, "name": name, "memory_bytes": memory, "peak_flops": peak, "peak_source": source}


def software_info() -> dict:
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
    }


def cases(args) -> list[Case]:
    on = {"on": True, "off": False}
    return [
        Case(m, p, on[c], ac, a, on[f], att)
        for m, p, c, ac, a, f, att in itertools.product(
            args.models, args.precision, args.compile, args.checkpointing, args.adamw, args.fsdp, args.attention
        )
    ]


def _fmt(value, spec: str, scale: float = 1.0) -> str:
    return "-" if value is None else format(value * scale, spec)


def print_row(r: dict) -> None:
    what = (
        f"{r['model']:>5} {r['precision']:>4} compile={'on ' if r['compile'] else 'off'} "
        f"ckpt={r['checkpointing']:<9} {r['adamw']:<7} fsdp={'on ' if r['fsdp'] else 'off'} "
        f"sdpa={r.get('attention_kernel', r['attention'])[:9]:<9}"
    )
    if r.get("status") != "ok":
        print(f"{what}  {r['status']}: {r.get('error', '')[:200]}  (plan {r['predicted_memory_gb']:.1f} GB)")
        return
    b = r["breakdown_s"]
    print(
        f"{what}  {r['tokens_per_s']:>10,.0f}  {_fmt(r['mfu'], '6.1%')}  {1e3 * r['step_s']:8.1f}  "
        f"{1e3 * b['forward_backward']:8.1f}  {1e3 * b['optimizer']:6.1f}  {1e3 * b['data']:6.2f}  "
        f"{_fmt(r['peak_memory_gb'], '7.1f')}  {r['predicted_memory_gb']:7.1f}  "
        f"{_fmt(r.get('predicted_over_measured'), '6.2f')}  {r['losses'][-1]:.3f}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__[__doc__.index("\n") :],
    )
    ap.add_argument("--models", nargs="+", default=["125m", "350m", "1b"], help="presets or model YAMLs")
    ap.add_argument(
        "--precision",
        nargs="+",
        choices=["auto", "bf16", "fp32", "tf32", "fp16"],
        default=["auto"],
        help="auto: bf16 on CUDA, fp32 on CPU",
    )
    ap.add_argument(
        "--compile",
        nargs="+",
        choices=["on", "off"],
        help="torch.compile of each block (default: on with CUDA, off on CPU)",
    )
    ap.add_argument(
        "--checkpointing",
        nargs="+",
        choices=["none", "selective", "block"],
        default=["none"],
        help="activation checkpointing: none, selective (matmul outputs kept) or block (full)",
    )
    ap.add_argument(
        "--adamw",
        nargs="+",
        choices=["fused", "foreach"],
        help="AdamW implementation (default: fused with CUDA, as training uses; foreach on CPU)",
    )
    ap.add_argument(
        "--fsdp",
        nargs="+",
        choices=["on", "off"],
        default=["off"],
        help="FSDP2 over one GPU (mixed-precision policy, per-block gathers) or the bare model",
    )
    ap.add_argument(
        "--attention",
        nargs="+",
        choices=["default", "flash", "efficient", "cudnn", "math"],
        default=["default"],
        help="SDPA kernel allowed (default: torch's own choice)",
    )
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--micro-batch", type=int, default=8, help="sequences per forward (default 8)")
    ap.add_argument("--grad-accum", type=int, default=1, help="micro-batches per optimizer step (default 1)")
    ap.add_argument("--steps", type=int, default=13, help="steps per case, warm-up included (default 13)")
    ap.add_argument("--warmup", type=int, default=3, help="first steps left out of the timing (default 3)")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--data", help="token-shard directory (default: synthetic bigram tokens)")
    ap.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    ap.add_argument("--peak-flops", type=float, help="override the device's peak FLOP/s for MFU")
    ap.add_argument(
        "--json", help="output JSON (default: $OUT/bench_gpu.json when OUT is set, else out/bench_gpu.json)"
    )
    ap.add_argument("--smoke", action="store_true", help="CPU check: tiny preset, two steps of 2 x 64 tokens")
    args = ap.parse_args(argv)
    if args.smoke:
        args.models, args.device, args.seq_len, args.micro_batch, args.steps, args.warmup = ["tiny"], "cpu", 64, 2, 2, 1
    if not 0 <= args.warmup < args.steps:
        ap.error("--warmup must be at least 0 and below --steps")
    device = resolve_device(args.device)
    args.precision = [resolve_precision(p, device) for p in args.precision]
    args.compile = args.compile or (["on"] if device.type == "cuda" else ["off"])
    args.adamw = args.adamw or (["fused"] if device.type == "cuda" else ["foreach"])
    path = args.json or os.path.join(os.environ.get("OUT") or os.path.join(ROOT, "out"), "bench_gpu.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)

    info = device_info(device, args.peak_flops)
    report = {
        "bench": "bench_gpu",
        "command": [sys.executable, *sys.argv],
        "device": info,
        "software": software_info(),
        "mfu_formula": MFU_FORMULA,
        "cases": [],
    }
    peak = info["peak_flops"]
    print(
        f"device: {info['name']} ({device.type}); peak {_fmt(peak, '.4g', 1e-12)} TFLOP/s dense bf16 "
        f"({info['peak_source']})"
    )
    print(f"MFU: {MFU_FORMULA}")
    print(
        f"{'case':<74}  {'tokens/s':>10}  {'MFU':>6}  {'step ms':>8}  {'fwd+bwd':>8}  {'optim':>6}  {'data':>6}  "
        f"{'peak GB':>7}  {'plan GB':>7}  {'plan/peak':>6}  loss",
        flush=True,
    )
    planned = [(case, train_config(case, args, device)) for case in cases(args)]  # a bad config fails now
    for case, cfg in planned:
        result = describe(case, cfg, args)
        try:
            result.update(run_case(case, cfg, args, device, peak), status="ok")
        except torch.cuda.OutOfMemoryError as exc:
            result.update(status="oom", error=str(exc).splitlines()[0])
        except Exception as exc:  # one case failing must not lose the others' figures
            traceback.print_exc()
            result.update(status="error", error=f"{type(exc).__name__}: {exc}")
        release(device)
        report["cases"].append(result)
        atomic_write_text(path, json.dumps(report, indent=1) + "\n")
        print_row(result)
        sys.stdout.flush()
    if dist.is_initialized():
        dist.destroy_process_group()
    print(f"wrote {path}")
    return 0 if all(r["status"] == "ok" for r in report["cases"]) else 1


if __name__ == "__main__":
    sys.exit(main())
