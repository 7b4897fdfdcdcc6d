"""``pretrain plan``: per-GPU memory, the simplest parallel layout that fits, and time to train.

Memory per GPU = model states + activations (+ FSDP's gathered buffers):
- model states, bytes per parameter (weights, gradients, AdamW states): fp32 4 + 4 + 8 (7B: 28 GB +
  28 GB + 56 GB); bf16 mixed precision 2 + 2 + 12 (fp32 master weights, momentum and variance), the
  ZeRO paper's accounting (Rajbhandari et al. 2020). DDP replicates all three; ZeRO-1 shards the
  optimizer over data-parallel ranks, ZeRO-2 also gradients, ZeRO-3 (FSDP) also weights. Tensor
  parallelism (degree t) splits every matrix t ways; only the norm weights stay replicated. Our
  trainer's FSDP2 keeps the fp32 master as the sharded parameter and reduces gradients in fp32: the
  same 16 bytes per parameter, all sharded. Gradient accumulation reduce-scatters every micro-batch by
  default, so only gradient shards accumulate; with ``no_sync`` accumulation (one reduction per step)
  every rank holds the full unsharded gradients, in fp32 (FSDP2 accumulates in its reduce dtype), from
  the first micro-batch to the last: 4 bytes per parameter (divided by t only).
- activations saved for backward, per token per layer, measured on our Llama block (tests check the
  count against the tensors autograd saves): each RMSNorm keeps an fp32 copy of its input and of the
  normalised value plus its output (8 d bytes + d elements); attention keeps q, k, v (full width after
  each kv head once: SDPA's enable_gqa) and its output (2 d + 2 kv elements; flash attention has no
  seq^2 term); SwiGLU keeps gate,
  silu, up and product (4 ffn elements). Selective checkpointing keeps only matmul and attention
  outputs and the block input (5 d + 2 kv + 2 ffn elements); block checkpointing keeps each block's
  input (d elements) and rebuilds one block at a time. The backward pass also holds one block's
  activation gradients (and its recomputed activations). Sequence-parallel TP splits all of it t ways
  (Korthikanti et al. 2022). The loss keeps fp32 log-probabilities and, in the backward pass, their
  fp32 gradient and the logits' gradient (8 bytes + 1 element per vocabulary entry per token), split
  t ways under loss parallelism.
- FSDP gathers one unit (a block, or the root: embeddings + output) ahead of use: two gathered units
  plus one unit of unsharded gradients.
GB here are 1e9 bytes; GPUs are listed by their marketing size (an "80 GB" H100 has 85.9e9 bytes),
which leaves ~6% for the CUDA context, NCCL buffers and allocator fragmentation.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

from dataprep.units import human
from pretrain.budget import METHODS, estimate, parse_number
from pretrain.config import ModelConfig, TrainConfig
from pretrain.hardware import GPUSpec, get_gpu
from pretrain.model import flops_per_token, num_params

PRECISIONS = {"bf16": (2, 2, 12), "fp32": (4, 4, 8)}  # bytes per parameter: weights, gradients, optimizer
SHARDED = {"ddp": (False, False, False), "zero1": (False, False, True), "zero2": (False, True, True),
           "zero3": (True, True, True)}  # (weights, gradients, optimizer) sharded over data parallel
STAGE_NAMES = {"ddp": "DDP", "zero1": "ZeRO-1", "zero2": "ZeRO-2", "zero3": "FSDP (ZeRO-3)"}
RECOMPUTE = {"none": 1.0, "selective": 1.0, "block": 4 / 3}  # block checkpointing re-runs each forward
TOKENS_PER_STEP = 2**20  # default global batch: ~1M tokens, the usual size for 100M-10B models
GB = 1e9


def model_states(cfg: ModelConfig, stage: str, dp: int, tp: int, precision: str = "bf16",
                 n_params: int | None = None, unsharded_grads: bool = False) -> dict[str, float]:
    """Bytes per GPU of weights, gradients and optimizer states (``n_params`` overrides the count);
    ``unsharded_grads``: gradients held whole in fp32 (no-sync accumulation under ZeRO-2/3)."""
    total = num_params(cfg) if n_params is None else n_params
    replicated = (2 * cfg.n_layers + 1) * cfg.d_model if n_params is None else 0  # RMSNorm weights
    per_gpu = (total - replicated) / tp + replicated
    out = {}
    for name, nbytes, sharded in zip(("params", "grads", "optimizer"), PRECISIONS[precision], SHARDED[stage]):
        out[name] = per_gpu * nbytes / (dp if sharded else 1)
    if unsharded_grads and SHARDED[stage][1] and dp > 1:
        out["grads"] = per_gpu * 4
    return out


def activations(cfg: ModelConfig, seq_len: int, micro_batch: int, checkpointing: str, tp: int = 1,
                precision: str = "bf16", loss_parallel: bool = False) -> dict[str, float]:
    """Bytes per GPU of activations kept for the backward pass of one micro-batch (see module doc)."""
    elem = 2 if precision == "bf16" else 4
    d, f, kv = cfg.d_model, cfg.ffn_dim, cfg.n_kv_heads * cfg.head_dim
    tokens = micro_batch * seq_len
    norm = 8 * d + elem * d
    full = 2 * norm + elem * (2 * d + 2 * kv + 4 * f)
    per_layer = {"none": full, "selective": elem * (5 * d + 2 * kv + 2 * f), "block": elem * d}[checkpointing]
    # in flight during the backward pass: the gradients of one block's activations, plus that block's
    # recomputed activations under checkpointing
    in_flight = full if checkpointing == "none" else 2 * full
    layers = tokens * (cfg.n_layers * per_layer + in_flight + norm) / tp  # + the final norm
    logits = tokens * cfg.vocab_size * (elem + 8) / (tp if loss_parallel else 1)
    return {"per_token_layer": per_layer, "layers": layers, "logits": logits, "total": layers + logits}


def fsdp_buffers(cfg: ModelConfig, tp: int, precision: str = "bf16") -> float:
    """Bytes of gathered parameters and unsharded gradients FSDP holds besides the shards."""
    block = (num_params(cfg) - cfg.vocab_size * cfg.d_model * (1 if cfg.tie_embeddings else 2) - cfg.d_model)
    block /= cfg.n_layers
    root = cfg.vocab_size * cfg.d_model * (1 if cfg.tie_embeddings else 2)
    return 3 * max(block, root) / tp * (2 if precision == "bf16" else 4)


@dataclass
class Layout:
    stage: str  # ddp or zero3 (what our trainer runs); zero1/2 appear in the breakdown table only
    tp: int
    dp: int
    checkpointing: str
    memory: dict = field(default_factory=dict)
    fits: bool = False
    grad_accum: int | None = None
    reason: str = ""

    @property
    def name(self) -> str:
        parts = [] if self.dp == 1 else [f"{STAGE_NAMES[self.stage]} x{self.dp}"]
        if self.tp > 1:
            parts.append(f"TP {self.tp}")
        parts = parts or ["single GPU"]
        if self.checkpointing != "none":
            parts.append(f"{self.checkpointing} checkpointing")
        return " + ".join(parts)


def _candidates(cfg: ModelConfig, gpus: int, gpus_per_node: int) -> list[tuple[str, int, str]]:
    """Layouts from simplest to most involved: DDP, FSDP, FSDP + checkpointing, then FSDP + TP in a node."""
    out = [("ddp", 1, "none")]
    if gpus > 1:
        out.append(("zero3", 1, "none"))
    out += [("zero3" if gpus > 1 else "ddp", 1, ac) for ac in ("selective", "block")]
    for tp in (2, 4, 8):
        if tp <= gpus_per_node and gpus % tp == 0 and cfg.n_heads % tp == 0 and cfg.n_kv_heads % tp == 0:
            out += [("zero3" if gpus > tp else "ddp", tp, ac) for ac in ("none", "selective", "block")]
    return out


def layout_memory(cfg: ModelConfig, stage: str, tp: int, checkpointing: str, *, gpus: int, seq_len: int,
                  micro_batch: int, precision: str = "bf16", grad_accum: int = 1,
                  no_sync: bool = False) -> dict[str, float]:
    """Per-GPU memory breakdown (bytes) of one layout; ``no_sync`` accumulation over ``grad_accum`` > 1
    micro-batches keeps the gradients unsharded (see module doc)."""
    dp = gpus // tp
    mem = model_states(cfg, stage, dp, tp, precision, unsharded_grads=no_sync and grad_accum > 1)
    act = activations(cfg, seq_len, micro_batch, checkpointing, tp, precision, loss_parallel=tp > 1)
    mem["activations"] = act["total"]
    mem["fsdp_buffers"] = fsdp_buffers(cfg, tp, precision) if stage == "zero3" and dp > 1 else 0.0
    mem["total"] = sum(mem.values())
    return mem


def _why(layout: Layout, previous: Layout | None, capacity: float) -> str:
    total, cap = layout.memory["total"] / GB, capacity / GB
    verdict = f"{total:.1f} GB {'<=' if layout.fits else '>'} {cap:.0f} GB per GPU"
    if previous is None:
        why = "simplest: every GPU holds all weights, gradients and Adam states"
    elif layout.tp != previous.tp:
        why = f"tensor parallel over {layout.tp} GPUs of a node splits weights and activations {layout.tp} ways"
    elif layout.checkpointing != previous.checkpointing:
        why = {"selective": "selective checkpointing keeps matmul outputs, recomputes cheap elementwise ops",
               "block": "block checkpointing keeps only block inputs, recomputing each forward (~33% more compute)",
               "none": ""}[layout.checkpointing]
    else:
        why = f"FSDP shards weights, gradients and Adam states {layout.dp} ways (all-gathers every step)"
    return f"{layout.name}: {verdict}; {why}"


def plan(cfg: ModelConfig, *, gpus: int, gpu: GPUSpec, seq_len: int | None = None, micro_batch: int = 4,
         global_batch: int | None = None, precision: str = "bf16", mfu: float = 0.4, tokens: float | None = None,
         gpus_per_node: int | None = None, show_tp: int | None = None, method: str = "approach1",
         tokens_source: str = "given", unique_tokens: float | None = None, no_sync: bool = False) -> dict:
    """Walk the layouts from simplest to most involved and return the first that fits, with timings.

    Without ``tokens`` the target is the Chinchilla ``method``'s D for the model; ``unique_tokens`` (the
    data's) turns the target into epochs. ``no_sync``: gradient accumulation without a reduce-scatter per
    micro-batch (counted in memory)."""
    seq_len = seq_len or cfg.max_seq_len
    gpus_per_node = gpus_per_node or min(gpus, gpu.gpus_per_node)
    if seq_len > cfg.max_seq_len:
        raise ValueError(f"sequence length {seq_len} exceeds the model's max_seq_len {cfg.max_seq_len}")
    for value, what in ((gpus, "GPU count"), (micro_batch, "micro-batch"), (gpus_per_node, "GPUs per node"),
                        (seq_len, "sequence length")):
        if value < 1:
            raise ValueError(f"{what} must be at least 1, got {value}")
    if global_batch is not None and global_batch < 1:
        raise ValueError(f"global batch must be at least 1, got {global_batch}")
    if not 0 < mfu <= 1:
        raise ValueError(f"MFU must be in (0, 1], got {mfu}")
    if tokens is not None and not tokens > 0:
        raise ValueError(f"token count must be positive, got {tokens}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}")
    capacity = gpu.memory_bytes
    tried, chosen, previous = [], None, None
    for stage, tp, ac in _candidates(cfg, gpus, gpus_per_node):
        layout = Layout(stage, tp, gpus // tp, ac)
        accum = _accum_steps(global_batch, seq_len, micro_batch * layout.dp)
        layout.memory = layout_memory(cfg, stage, tp, ac, gpus=gpus, seq_len=seq_len, micro_batch=micro_batch,
                                      precision=precision, grad_accum=accum, no_sync=no_sync)
        layout.fits = layout.memory["total"] <= capacity
        layout.reason = _why(layout, previous, capacity)
        tried.append(layout)
        previous = layout
        if layout.fits:
            chosen = layout
            break
    if chosen is None:
        raise ValueError(_no_fit_message(cfg, tried, gpus, gpu, seq_len, micro_batch, precision, global_batch,
                                         no_sync))
    per_step = micro_batch * chosen.dp
    if global_batch is None:
        chosen.grad_accum = _accum_steps(None, seq_len, per_step)
    elif global_batch % per_step:
        raise ValueError(f"global batch {global_batch} is not a multiple of micro-batch {micro_batch} x "
                         f"{chosen.dp} data-parallel ranks ({chosen.name}); try {_nearest(global_batch, per_step)}")
    else:
        chosen.grad_accum = global_batch // per_step
    if show_tp is not None and (show_tp < 1 or gpus % show_tp):
        raise ValueError(f"--tp {show_tp} does not divide {gpus} GPUs")
    return _report(cfg, chosen, tried, gpus=gpus, gpu=gpu, seq_len=seq_len, micro_batch=micro_batch,
                   precision=precision, mfu=mfu, tokens=tokens, show_tp=show_tp, method=method,
                   tokens_source=tokens_source, unique_tokens=unique_tokens, no_sync=no_sync)


def _accum_steps(global_batch: int | None, seq_len: int, per_step: int) -> int:
    """Micro-batches per optimizer step: the given global batch, else ~TOKENS_PER_STEP tokens."""
    if global_batch is None:
        return max(1, round(TOKENS_PER_STEP / (seq_len * per_step)))
    return max(1, global_batch // per_step)


def _nearest(value: int, multiple: int) -> str:
    low = max(multiple, value // multiple * multiple)
    return f"{low} or {low + multiple}" if low < value else str(low)


def _no_fit_message(cfg, tried, gpus, gpu, seq_len, micro_batch, precision, global_batch, no_sync) -> str:
    leanest = min(tried, key=lambda t: t.memory["total"])
    msg = (f"the model ({human(num_params(cfg))} parameters) does not fit on {gpus} x {gpu.name}: the leanest layout, "
           f"{leanest.name}, needs {leanest.memory['total'] / GB:.1f} GB per GPU of {gpu.memory_gb:g} GB")
    if micro_batch > 1:
        one = layout_memory(cfg, leanest.stage, leanest.tp, leanest.checkpointing, gpus=gpus, seq_len=seq_len,
                            micro_batch=1, precision=precision, no_sync=no_sync,
                            grad_accum=_accum_steps(global_batch, seq_len, leanest.dp))
        if one["total"] <= gpu.memory_bytes:
            return msg + f"; --micro-batch 1 would fit ({one['total'] / GB:.1f} GB)"
    return msg + "; use more GPUs, a shorter sequence, or GPUs with more memory"


def _report(cfg, chosen: Layout, tried, *, gpus, gpu, seq_len, micro_batch, precision, mfu, tokens, show_tp,
            method, tokens_source, unique_tokens, no_sync) -> dict:
    n = num_params(cfg)
    if tokens is None:
        tokens, tokens_source = estimate(method, params=n).tokens, f"Chinchilla {METHODS[method].name} for this N"
    global_batch = micro_batch * chosen.dp * chosen.grad_accum
    tokens_per_step = global_batch * seq_len
    step_flops = flops_per_token(cfg, seq_len) * tokens_per_step * RECOMPUTE[chosen.checkpointing]
    step_time = step_flops / (gpus * gpu.peak_flops_bf16 * mfu)
    tokens_per_day = tokens_per_step / step_time * 86400
    breakdown = {tp: {stage: layout_memory(cfg, stage, tp, chosen.checkpointing, gpus=gpus, seq_len=seq_len,
                                           micro_batch=micro_batch, precision=precision,
                                           grad_accum=chosen.grad_accum, no_sync=no_sync) for stage in SHARDED}
                 for tp in sorted({1, chosen.tp, show_tp or 1})}
    act = {ac: activations(cfg, seq_len, micro_batch, ac, chosen.tp, precision, chosen.tp > 1)["total"]
           for ac in RECOMPUTE}
    return {
        "model": {"params": n, "non_embedding_params": num_params(cfg, exclude_embedding=True), **cfg.model_dump()},
        "cluster": {"gpus": gpus, **gpu.to_dict()},
        "precision": precision, "seq_len": seq_len, "micro_batch": micro_batch,
        "layout": {"name": chosen.name, "stage": chosen.stage, "dp": chosen.dp, "tp": chosen.tp,
                   "checkpointing": chosen.checkpointing, "grad_accum": chosen.grad_accum,
                   "no_sync_accumulation": no_sync,
                   "global_batch": global_batch, "tokens_per_step": tokens_per_step, "memory": chosen.memory},
        "decisions": [t.reason for t in tried],
        "breakdown": {str(tp): rows for tp, rows in breakdown.items()},
        "activations_by_checkpointing": act,
        "time": {"mfu": mfu, "flops_per_token": flops_per_token(cfg, seq_len),
                 "recompute_factor": RECOMPUTE[chosen.checkpointing], "step_seconds": step_time,
                 "tokens_per_day": tokens_per_day, "target_tokens": tokens, "target_source": tokens_source,
                 "steps": math.ceil(tokens / tokens_per_step), "days": tokens / tokens_per_day,
                 "unique_tokens": unique_tokens, "epochs": tokens / unique_tokens if unique_tokens else None},
    }


def train_config(result: dict, cfg: ModelConfig, data: list[str], out_dir: str) -> TrainConfig:
    """The chosen layout as a ``pretrain train`` config (FSDP2 runs the DDP layout too: it only saves memory)."""
    lay, steps = result["layout"], result["time"]["steps"]
    return TrainConfig.model_validate({
        "model": cfg.model_dump(), "data": {"sources": [{"path": p} for p in data]},
        "seq_len": result["seq_len"], "micro_batch_size": result["micro_batch"],
        "global_batch_size": lay["global_batch"], "max_tokens": int(result["time"]["target_tokens"]),
        "precision": "bf16" if result["precision"] == "bf16" else "fp32", "device": "auto",
        "parallel": {"dp_shard": -1, "tp": lay["tp"], "activation_checkpointing": lay["checkpointing"],
                     "loss_parallel": lay["tp"] > 1, "no_sync_accumulation": lay["no_sync_accumulation"]},
        "optim": {"warmup_steps": min(2000, max(1, steps // 100))}, "out_dir": out_dir,
    })


def add_arguments(parser) -> None:
    parser.add_argument("model", help="model config YAML or preset (tiny, 125m, 350m, 1b, 3b, 7b)")
    parser.add_argument("--gpus", type=int, default=1, help="number of GPUs (default 1)")
    parser.add_argument("--gpu", default="h100", help="GPU type: h100, h200, a100-80gb, a100-40gb, l4, ... "
                        "(default h100)")
    parser.add_argument("--gpu-memory-gb", type=float, help="override the GPU's memory (GB)")
    parser.add_argument("--peak-flops", help="override the GPU's peak bf16 FLOP/s, e.g. 989e12")
    parser.add_argument("--gpus-per-node", type=int, help="GPUs per node: the tensor-parallel limit (default 8)")
    parser.add_argument("--seq-len", type=int, help="training sequence length (default: the model's max_seq_len)")
    parser.add_argument("--micro-batch", type=int, default=4, help="sequences per GPU per forward (default 4)")
    parser.add_argument("--global-batch", type=int, help="sequences per optimizer step (default: ~1M tokens)")
    parser.add_argument("--tp", type=int, help="also show the memory breakdown at this tensor-parallel degree")
    parser.add_argument("--precision", choices=list(PRECISIONS), default="bf16")
    parser.add_argument("--no-sync-accumulation", action="store_true",
                        help="accumulate gradients unsharded and reduce once per step (less communication; "
                             "every GPU then holds the full fp32 gradients)")
    parser.add_argument("--mfu", type=float, default=0.4, help="assumed model FLOPs utilisation (default 0.4)")
    parser.add_argument("--tokens", help="tokens to train on, e.g. 140B (default: the Chinchilla --method's D for N)")
    parser.add_argument("--epochs", type=float, help="train on this many passes over the --data shards instead "
                        "(tokens = epochs x their manifest's token count; see pretrain budget --data)")
    parser.add_argument("--method", choices=list(METHODS), default="approach1",
                        help="Chinchilla method for the default tokens (default approach1)")
    parser.add_argument("--out", help="write the chosen layout as a training config YAML for pretrain train")
    parser.add_argument("--data", action="append", help="token-shard directory for --out (repeatable)")
    parser.add_argument("--run-dir", default="runs/plan", help="out_dir of the emitted training config")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")


def main(args) -> int:
    from dataclasses import replace

    from pretrain.config import save_yaml
    from pretrain.data_constrained import read_corpus
    from pretrain.sizing import resolve_model

    cfg = resolve_model(args.model)
    gpu = get_gpu(args.gpu)
    if args.gpu_memory_gb is not None:
        gpu = replace(gpu, memory_gb=args.gpu_memory_gb)
    if args.peak_flops is not None:
        gpu = replace(gpu, peak_flops_bf16=parse_number(args.peak_flops))
    if args.out and not args.data:
        raise ValueError("--out needs --data: the token-shard directory the training config reads")
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
                  unique_tokens=unique, no_sync=args.no_sync_accumulation)
    if args.out:
        save_yaml(train_config(result, cfg, args.data, args.run_dir), args.out)
        result["written"] = args.out
    print(json.dumps(result, indent=2) if args.json else format_report(result))
    return 0


def format_report(r: dict) -> str:
    lay, t, m = r["layout"], r["time"], r["model"]
    lines = [f"model: {human(m['params'])} params ({m['n_layers']} layers, d_model {m['d_model']}), "
             f"seq {r['seq_len']}, micro-batch {r['micro_batch']}, {r['precision']}; "
             f"{r['cluster']['gpus']} x {r['cluster']['name']}", "",
             "decisions:"] + [f"  {line}" for line in r["decisions"]]
    lines += ["", f"chosen: {lay['name']}"]
    for tp, rows in r["breakdown"].items():
        lines += ["", f"per-GPU memory, GB (TP {tp}, checkpointing: {lay['checkpointing']}):",
                  f"  {'':<15}{'params':>8}{'grads':>8}{'optim':>8}{'activ':>8}{'fsdp':>8}{'total':>8}"]
        for stage, mem in rows.items():
            cells = "".join(f"{mem[k] / GB:>8.1f}" for k in ("params", "grads", "optimizer", "activations",
                                                             "fsdp_buffers", "total"))
            lines.append(f"  {STAGE_NAMES[stage]:<15}{cells}")
    acts = ", ".join(f"{k} {v / GB:.1f}" for k, v in r["activations_by_checkpointing"].items())
    lines += ["", f"activations per GPU by checkpointing (GB): {acts}",
              f"batch: {lay['global_batch']} sequences = micro-batch {r['micro_batch']} x {lay['dp']} data-parallel "
              f"x {lay['grad_accum']} accumulation steps ({human(lay['tokens_per_step'])} tokens), gradients "
              + ("held unsharded until the last micro-batch (no-sync)" if lay["no_sync_accumulation"]
                 else "reduce-scattered every micro-batch"),
              f"time at MFU {t['mfu']:g}: {t['step_seconds']:.2f} s/step, {human(t['tokens_per_day'])} tokens/day, "
              f"{t['days']:.1f} days for {human(t['target_tokens'])} tokens "
              f"({t['target_source']}, {t['steps']:,} steps)"]
    if t.get("epochs") is not None:
        lines.append(f"data: {human(t['unique_tokens'])} unique tokens, so {human(t['target_tokens'])} tokens are "
                     f"{t['epochs']:.1f} epochs (what repeats are worth: pretrain budget --data)")
    if "written" in r:
        lines.append(f"wrote {r['written']}")
    return "\n".join(lines)
