"""The planner behind ``pretrain plan``: the fastest parallel layout that fits, walking the decision tree
with reasons, and time to train (the command: ``pretrain/commands/plan.py``; its tables: ``plan_report.py``).

The walk (``_candidates``) goes from simplest to most involved: DDP; ZeRO-2; FSDP (ZeRO-3); a micro-batch
of 1 before any recomputation; for long sequences context parallel first; selective then block
checkpointing; tensor parallel within a node; pipeline parallel across nodes (interleaving stages until
the bubble is under ``--max-bubble``); context parallel; CPU offload last. Each layout's memory,
communication and step time come from ``pretrain/planning/plan_memory.py`` (its docstring holds the accounting):
of the layouts that fit, the one with the least estimated time per token wins (the earlier in the walk on
a tie), so a layout that sends terabytes per step over the nodes' NICs loses to one that keeps its traffic
on NVLink.
"""

import math
from dataclasses import dataclass, field
from types import SimpleNamespace

from dataprep.core.errors import UsageError
from dataprep.core.units import human
from pretrain.config import ModelConfig, TrainConfig
from pretrain.layout_rules import layout_problems
from pretrain.models.documents import attention_span, block_mask_bytes
from pretrain.models.llama import num_params
from pretrain.planning.budget import METHODS, estimate, params_of_model
from pretrain.planning.flops import deepseek_flops_per_token, flops_per_token
from pretrain.planning.hardware import GPUSpec
from pretrain.planning.hyperparameters import Hyperparameters, optimal_hyperparameters, warmup_steps
from pretrain.planning.plan_memory import (
    GB,
    PRECISIONS,
    RECOMPUTE,
    activations,
    communication,
    layout_memory,
    model_states,
    step_time,
)

LONG_SEQUENCE = 32768  # tokens from which context parallelism comes before checkpointing
ZERO_LEVEL_NAMES = {"ddp": "DDP", "zero1": "ZeRO-1", "zero2": "ZeRO-2", "zero3": "FSDP (ZeRO-3)"}
# the ZeRO levels the trainer runs, so the ones the memory table lists (ZeRO-1: parallel.shard_optimizer,
# replicated weights without tensor, context or pipeline parallelism)
RUNNABLE_ZERO_LEVELS = ("ddp", "zero1", "zero2", "zero3")


@dataclass
class Layout:
    """One point of the walk: the degrees of every mesh dimension and how each runs."""

    zero_level: str  # one of RUNNABLE_ZERO_LEVELS
    tp: int
    dp: int  # data-parallel ranks (replicas x shards)
    checkpointing: str
    micro_batch: int = 4
    pp: int = 1
    cp: int = 1
    stages_per_rank: int = 1  # > 1: interleaved 1F1B
    offload: bool = False
    compiled: bool = False  # torch.compile of each block (where the trainer supports it: no TP, CP or PP)
    smaller_micro: bool = False  # the walk lowered the micro-batch to 1
    memory: dict = field(default_factory=dict)
    fits: bool = False
    grad_accum: int | None = None
    bubble: float = 0.0
    reason: str = ""
    time: dict = field(default_factory=dict)  # step_time's parts, for layouts that fit
    tokens_per_step: int = 0

    @property
    def seconds_per_token(self) -> float:
        return self.time["total"] / self.tokens_per_step

    @property
    def schedule(self) -> str:
        return "interleaved_1f1b" if self.stages_per_rank > 1 else "1f1b"

    @property
    def name(self) -> str:
        parts = [] if self.dp == 1 and self.cp == 1 else [f"{ZERO_LEVEL_NAMES[self.zero_level]} x{self.dp}"]
        parts += [f"{label} {n}" for label, n in (("TP", self.tp), ("CP", self.cp)) if n > 1]
        if self.pp > 1:
            parts.append(
                f"PP {self.pp}" + (f" (interleaved x{self.stages_per_rank})" if self.stages_per_rank > 1 else "")
            )
        parts = parts or ["single GPU"]
        if self.smaller_micro:
            parts.append("micro-batch 1")
        if self.checkpointing != "none":
            parts.append(f"{self.checkpointing} checkpointing")
        if self.offload:
            parts.append("CPU offload")
        return " + ".join(parts)

    def degrees(self) -> dict:
        """Every degree of the mesh, as ``parallel:`` of a training config names them."""
        replicate = self.dp if self.zero_level in ("ddp", "zero1") else 1
        return {
            "dp_replicate": replicate,
            "dp_shard": self.dp // replicate,
            "tp": self.tp,
            "pp": self.pp,
            "cp": self.cp,
            "offload": self.offload,
            "shard_optimizer": self.zero_level == "zero1",
        }


def _tp_degrees(cfg: ModelConfig, gpus: int, gpus_per_node: int) -> list[int]:
    return [
        t
        for t in (2, 4, 8)
        if t <= gpus_per_node and gpus % t == 0 and cfg.n_heads % t == 0 and cfg.n_kv_heads % t == 0
    ]


def _cp_layouts(gpus: int, tp: int, seq_len: int, checkpointing: tuple[str, ...]) -> list[Layout]:
    out, cp = [], 2
    while gpus % (tp * cp) == 0 and seq_len % (2 * cp * tp) == 0:
        out += [Layout("zero3", tp, gpus // (tp * cp), ac, 1, cp=cp) for ac in checkpointing]
        cp *= 2
    return out


def _candidates(cfg: ModelConfig, gpus: int, gpus_per_node: int, micro_batch: int, seq_len: int) -> list[Layout]:
    """The decision tree as a list, from simplest to most involved: DDP, ZeRO-2, ZeRO-3, a micro-batch of 1,
    (CP first for a long sequence), selective then block checkpointing, TP within a node, PP across nodes
    (with the widest TP, so stages cross nodes; DDP, ZeRO-2 or FSDP over the rest), CP, CPU offload last."""
    sharded = "zero3" if gpus > 1 else "ddp"
    out = [Layout("ddp", 1, gpus, "none", micro_batch)]
    if gpus > 1:
        out += [Layout(level, 1, gpus, "none", micro_batch) for level in ("zero1", "zero2", "zero3")]
    if micro_batch > 1:
        out.append(Layout(sharded, 1, gpus, "none", 1))
    if seq_len >= LONG_SEQUENCE:  # the sequence, not the model, is what does not fit: split it first
        out += _cp_layouts(gpus, 1, seq_len, ("none", "selective"))
    out += [Layout(sharded, 1, gpus, ac, 1) for ac in ("selective", "block")]
    tps = _tp_degrees(cfg, gpus, gpus_per_node)
    for tp in tps:
        level = "zero3" if gpus > tp else "ddp"
        out += [Layout(level, tp, gpus // tp, ac, 1) for ac in ("none", "selective", "block")]
    tp = tps[-1] if tps else 1
    pp = 2
    while pp <= cfg.n_layers and gpus % (tp * pp) == 0 and tp * pp <= gpus:
        dp = gpus // (tp * pp)
        out += [
            Layout(level, tp, dp, ac, 1, pp=pp)
            for level in (("ddp", "zero2", "zero3") if dp > 1 else ("ddp",))
            for ac in ("none", "selective", "block")
        ]
        pp *= 2
    out += _cp_layouts(gpus, tp, seq_len, ("selective", "block"))
    if gpus > 1:  # FSDP streams the shards from host memory (our trainer offloads through FSDP2 only)
        out.append(Layout("zero3", 1, gpus, "block", 1, offload=True))
    for layout in out:
        layout.smaller_micro = layout.micro_batch < micro_batch
    return out


def _pipeline_schedule(lay: Layout, cfg: ModelConfig, max_bubble: float) -> str:
    """Interleave (several stages per rank) until the bubble is under ``max_bubble``, if layers allow."""
    from pretrain.components.metrics import bubble_fraction

    v = 1
    lay.bubble = bubble_fraction("1f1b", lay.pp, lay.grad_accum, 1)
    while lay.bubble > max_bubble and cfg.n_layers >= lay.pp * v * 2 and lay.grad_accum % lay.pp == 0:
        v *= 2
        lay.bubble = bubble_fraction("interleaved_1f1b", lay.pp, lay.grad_accum, v)
    lay.stages_per_rank = v
    verdict = "under" if lay.bubble <= max_bubble else "above"
    return (
        f"{lay.grad_accum} micro-batches over {lay.pp} stages"
        + (f", {v} per rank" if v > 1 else "")
        + f": bubble {lay.bubble:.1%}, {verdict} the {max_bubble:.0%} target"
    )


_ZERO1 = "ZeRO-1 shards the Adam states {dp} ways; weights and gradients stay whole on every GPU"
_ZERO2 = "ZeRO-2 shards gradients and Adam states {dp} ways, keeps the gathered weights forward to backward"
_ZERO3 = "FSDP shards weights, gradients and Adam states {dp} ways (all-gathers every step)"


def _why(layout: Layout, previous: Layout | None, capacity: float, layout_cfg: ModelConfig) -> str:
    total, cap = layout.memory["total"] / GB, capacity / GB
    verdict = f"{total:.1f} GB {'<=' if layout.fits else '>'} {cap:.0f} GB per GPU"
    if previous is None:
        why = "simplest: every GPU holds all weights, gradients and Adam states"
    elif layout.offload:
        host = model_states(layout_cfg, "zero3", layout.dp, 1)
        why = (
            f"last resort: weights, gradients and Adam states in host memory "
            f"({sum(host.values()) * min(layout.dp, 8) / GB:.0f} GB per 8-GPU node), streamed to the GPUs every step"
        )
    elif layout.cp != previous.cp and layout.cp > 1:
        why = f"context parallel splits each sequence {layout.cp} ways (activations), gathering keys and values"
    elif layout.pp != previous.pp:
        why = f"pipeline parallel over {layout.pp} stages across nodes splits the layers {layout.pp} ways"
    elif layout.tp != previous.tp:
        why = f"tensor parallel over {layout.tp} GPUs of a node splits weights and activations {layout.tp} ways"
    elif layout.micro_batch != previous.micro_batch:
        why = "a micro-batch of 1 (more accumulation steps) before recomputing anything"
    elif layout.zero_level != previous.zero_level and layout.checkpointing == "none":
        why = {"ddp": "DDP replicates what is left after TP and PP", "zero1": _ZERO1, "zero2": _ZERO2, "zero3": _ZERO3}[
            layout.zero_level
        ]
        why = why.format(dp=layout.dp)
    elif layout.checkpointing != previous.checkpointing:
        why = {
            "selective": "selective checkpointing keeps matmul outputs, recomputes cheap elementwise ops",
            "block": "block checkpointing keeps only block inputs, recomputing each forward (~33% more compute)",
            "none": "",
        }[layout.checkpointing]
    else:
        why = (_ZERO2 if layout.zero_level == "zero2" else _ZERO3).format(dp=layout.dp)
    return f"{layout.name}: {verdict}; {why}"


def plan(
    cfg: ModelConfig,
    *,
    gpus: int,
    gpu: GPUSpec,
    seq_len: int | None = None,
    micro_batch: int = 4,
    global_batch: int | None = None,
    precision: str = "bf16",
    mfu: float = 0.4,
    tokens: float | None = None,
    gpus_per_node: int | None = None,
    show_tp: int | None = None,
    method: str = "approach1",
    tokens_source: str = "given",
    unique_tokens: float | None = None,
    no_sync: bool = False,
    max_bubble: float = 0.1,
    lr: float | None = None,
    document_tokens: float | None = None,
) -> dict:
    """Walk the layouts from simplest to most involved and return the fastest that fits, with timings.

    Without ``tokens`` the target is the scaling law ``method``'s D for the model; ``unique_tokens`` (the
    data's) turns the target into epochs. Without ``global_batch`` or ``lr`` they are DeepSeek LLM's for the
    run's compute (``pretrain.planning.hyperparameters``), the batch rounded to each layout. ``no_sync``:
    gradient accumulation without a reduce-scatter per micro-batch (counted in memory). ``max_bubble``: the
    pipeline bubble to stay under. ``precision``: bf16, fp16, tf32 or fp32, each timed at its own peak
    (``GPUSpec.peak``). ``document_tokens``: attention within documents of this token-weighted mean length
    (``data.document_mask``): attention computes over the blocks of each document only, and each forward holds
    its block mask."""
    seq_len = cfg.max_seq_len if seq_len is None else seq_len
    span = attention_span(seq_len, document_tokens) if document_tokens else None
    gpus_per_node = min(gpus, gpu.gpus_per_node) if gpus_per_node is None else gpus_per_node
    if seq_len > cfg.max_seq_len:
        raise UsageError(f"sequence length {seq_len} exceeds the model's max_seq_len {cfg.max_seq_len}")
    for value, what in (
        (gpus, "GPU count"),
        (micro_batch, "micro-batch"),
        (gpus_per_node, "GPUs per node"),
        (seq_len, "sequence length"),
    ):
        if value < 1:
            raise UsageError(f"{what} must be at least 1, got {value}")
    if global_batch is not None and global_batch < 1:
        raise UsageError(f"global batch must be at least 1, got {global_batch}")
    if not 0 < mfu <= 1:
        raise UsageError(f"MFU must be in (0, 1], got {mfu}")
    if not 0 <= max_bubble < 1:
        raise UsageError(f"the pipeline bubble to stay under must be in [0, 1), got {max_bubble}")
    if tokens is not None and not tokens > 0:
        raise UsageError(f"token count must be positive, got {tokens}")
    if lr is not None and not lr > 0:
        raise UsageError(f"learning rate must be positive, got {lr}")
    if precision not in PRECISIONS:
        raise UsageError(f"precision must be one of {', '.join(PRECISIONS)}")
    tokens, tokens_source = _target_tokens(cfg, seq_len, tokens, method, tokens_source)
    law = optimal_hyperparameters(deepseek_flops_per_token(cfg, seq_len) * tokens, seq_len)
    capacity = gpu.memory_bytes
    tried, previous = [], None
    candidates = _candidates(cfg, gpus, gpus_per_node, micro_batch, seq_len)
    for layout in _runnable(
        candidates,
        cfg,
        gpus=gpus,
        gpu=gpu,
        seq_len=seq_len,
        precision=precision,
        document_mask=document_tokens is not None,
    ):
        layout.grad_accum = _accum_steps(global_batch, law, layout)
        # compiled blocks where the trainer compiles them: faster, fewer saved activations (docs/gpu.md)
        layout.compiled = gpu.accelerator and layout.tp == layout.cp == layout.pp == 1
        layout.memory = layout_memory(
            cfg,
            layout.zero_level,
            layout.tp,
            layout.checkpointing,
            gpus=gpus,
            seq_len=seq_len,
            micro_batch=layout.micro_batch,
            precision=precision,
            grad_accum=layout.grad_accum,
            no_sync=no_sync,
            pp=layout.pp,
            cp=layout.cp,
            offload=layout.offload,
            compiled=layout.compiled,
        )
        if document_tokens:
            layout.memory["document_mask"] = block_mask_bytes(layout.micro_batch, seq_len // layout.cp)
            layout.memory["total"] += layout.memory["document_mask"]
        layout.fits = layout.memory["total"] <= capacity
        schedule = _pipeline_schedule(layout, cfg, max_bubble) if layout.pp > 1 else ""  # names interleaving
        layout.reason = _why(layout, previous, capacity, cfg) + (f"; {schedule}" if schedule else "")
        if layout.fits:
            layout.tokens_per_step = layout.micro_batch * layout.dp * layout.grad_accum * seq_len
            layout.time = step_time(
                cfg,
                layout,
                communication(cfg, layout, seq_len, precision),
                gpu=gpu,
                gpus=gpus,
                gpus_per_node=gpus_per_node,
                seq_len=seq_len,
                tokens_per_step=layout.tokens_per_step,
                mfu=mfu,
                precision=precision,
                attention_span=span,
            )
        tried.append(layout)
        previous = layout
    fitting = [t for t in tried if t.fits]
    if not fitting:
        raise UsageError(_no_fit_message(cfg, tried, gpus, gpu))
    chosen = min(fitting, key=lambda t: t.seconds_per_token)  # the first of equals: min keeps the earliest
    for t in fitting:
        t.reason += f"; {_time_summary(t)}" + (
            " <- fastest"
            if t is chosen
            else f", {t.seconds_per_token / chosen.seconds_per_token - 1:+.0%} time per token"
        )
    per_step = chosen.micro_batch * chosen.dp
    if global_batch is not None and global_batch % per_step:
        raise UsageError(
            f"global batch {global_batch} is not a multiple of micro-batch {chosen.micro_batch} x "
            f"{chosen.dp} data-parallel ranks ({chosen.name}); try {_nearest(global_batch, per_step)}"
        )
    if show_tp is not None and (show_tp < 1 or gpus % show_tp):
        raise UsageError(f"--tp {show_tp} does not divide {gpus} GPUs")
    result = _report(
        cfg,
        chosen,
        tried,
        gpus=gpus,
        gpu=gpu,
        seq_len=seq_len,
        precision=precision,
        mfu=mfu,
        tokens=tokens,
        show_tp=show_tp,
        tokens_source=tokens_source,
        unique_tokens=unique_tokens,
        no_sync=no_sync,
        attention_span=span,
    )
    if document_tokens:
        result["document_mask"] = {"mean_document_tokens": document_tokens, "attention_span": span}
    result["cluster"]["gpus_per_node"] = gpus_per_node  # the one the layouts were chosen for
    result["hyperparameters"] = _hyperparameters(
        law, result, lr=lr, batch_given=global_batch is not None, flops_per_token=deepseek_flops_per_token(cfg, seq_len)
    )
    return result


def _runnable(
    layouts: list[Layout],
    cfg: ModelConfig,
    *,
    gpus: int,
    gpu: GPUSpec,
    seq_len: int,
    precision: str,
    document_mask: bool = False,
) -> list[Layout]:
    """The layouts the trainer runs (``pretrain.layout_rules``, the rules the config and the trainer check);
    when it runs none of them, the first rule that refused them."""
    runnable, refusals = [], []
    for lay in layouts:
        parallel = SimpleNamespace(
            **lay.degrees(),
            pp_schedule=lay.schedule,
            pp_stages_per_rank=lay.stages_per_rank,
            compile=False,
            loss_parallel=lay.tp > 1,
            no_sync_accumulation=False,
        )
        problems = layout_problems(
            parallel,
            cfg,
            seq_len=seq_len,
            precision=precision,
            world_size=gpus,
            device_type="cuda" if gpu.accelerator else "cpu",
            document_mask=document_mask,
        )
        if problems:
            refusals.append(problems[0])
        else:
            runnable.append(lay)
    if not runnable:
        raise UsageError(f"no layout of {cfg.n_layers} layers on {gpus} GPU(s) can run: {refusals[0]}")
    return runnable


def _time_summary(lay: Layout) -> str:
    t = lay.time
    parts = [f"compute {t['compute']:.1f}"] + [
        f"{label} {t[key]:.1f}"
        for key, label in (("bubble", "bubble"), ("exposed_comm", "exposed comm"), ("host_optimizer", "host AdamW"))
        if t[key] >= 0.05
    ]
    return f"{t['total']:.1f} s/step ({', '.join(parts)})"


def _target_tokens(cfg: ModelConfig, seq_len: int, tokens: float | None, method: str, source: str) -> tuple[float, str]:
    """The tokens to train on and where they come from: as given, else the law ``method``'s D for the model."""
    if tokens is not None:
        return tokens, source
    n = params_of_model(method, cfg, seq_len)
    return estimate(method, params=n).tokens, f"{METHODS[method].name} for this N"


def _accum_steps(global_batch: int | None, law: Hyperparameters, layout: Layout) -> int:
    """Micro-batches per optimizer step: the given global batch, else the multiple of micro-batch x
    data-parallel ranks nearest the law's batch (at least one micro-batch per pipeline stage)."""
    per_step = layout.micro_batch * layout.dp
    if global_batch is None:
        return max(layout.pp, round(law.batch_sequences / per_step))
    return max(1, global_batch // per_step)


def _hyperparameters(
    law: Hyperparameters, result: dict, *, lr: float | None, batch_given: bool, flops_per_token: float
) -> dict:
    """The learning rate, batch and warmup the training config gets, which of them the law set, and how the
    user's differ from it."""
    batch, tokens_per_step = result["layout"]["global_batch"], result["layout"]["tokens_per_step"]
    differs = []
    if lr is not None and not math.isclose(lr, law.learning_rate, rel_tol=0.01):
        differs.append(f"learning rate {lr:.3g} given: {lr / law.learning_rate:.2f}x the law's {law.learning_rate:.2e}")
    if batch_given and not math.isclose(tokens_per_step, law.batch_tokens, rel_tol=0.01):
        differs.append(
            f"global batch {batch} sequences given: {human(tokens_per_step)} tokens, "
            f"{tokens_per_step / law.batch_tokens:.2f}x the law's {human(law.batch_tokens)}"
        )
    return {
        "learning_rate": law.learning_rate if lr is None else lr,
        "learning_rate_from": "law" if lr is None else "given",
        "global_batch": batch,
        "global_batch_from": "given" if batch_given else "law",
        "warmup_steps": warmup_steps(result["time"]["steps"]),
        "differs_from_law": differs,
        "law": law.to_dict() | {"flops_per_token": flops_per_token},
    }


def _nearest(value: int, multiple: int) -> str:
    low = max(multiple, value // multiple * multiple)
    return f"{low} or {low + multiple}" if low < value else str(low)


def _no_fit_message(cfg, tried, gpus, gpu) -> str:
    leanest = min(tried, key=lambda t: t.memory["total"])
    return (
        f"the model ({human(num_params(cfg))} parameters) does not fit on {gpus} x {gpu.name}: the leanest layout, "
        f"{leanest.name}, needs {leanest.memory['total'] / GB:.1f} GB per GPU of {gpu.memory_gb:g} GB; "
        "use more GPUs, a shorter sequence, or GPUs with more memory"
    )


def _report(
    cfg,
    chosen: Layout,
    tried,
    *,
    gpus,
    gpu,
    seq_len,
    precision,
    mfu,
    tokens,
    show_tp,
    tokens_source,
    unique_tokens,
    no_sync,
    attention_span=None,
) -> dict:
    n = num_params(cfg)
    micro_batch = chosen.micro_batch
    global_batch = micro_batch * chosen.dp * chosen.grad_accum
    tokens_per_step = global_batch * seq_len
    seconds = chosen.time["total"]
    tokens_per_day = tokens_per_step / seconds * 86400
    kw = dict(
        gpus=gpus,
        seq_len=seq_len,
        micro_batch=micro_batch,
        precision=precision,
        grad_accum=chosen.grad_accum,
        no_sync=no_sync,
        pp=chosen.pp,
        cp=chosen.cp,
        offload=chosen.offload,
        compiled=chosen.compiled,
    )
    breakdown = {
        tp: {level: layout_memory(cfg, level, tp, chosen.checkpointing, **kw) for level in RUNNABLE_ZERO_LEVELS}
        for tp in sorted({1, chosen.tp, show_tp or 1})
        if gpus % (tp * chosen.pp * chosen.cp) == 0
    }
    act = {
        ac: activations(
            cfg,
            seq_len // chosen.cp,
            micro_batch,
            ac,
            chosen.tp,
            precision,
            chosen.tp > 1,
            bf16_stream=chosen.dp * chosen.cp > 1,
            compiled=chosen.compiled,
        )["total"]
        for ac in RECOMPUTE
    }
    return {
        "model": {"params": n, "non_embedding_params": num_params(cfg, exclude_embedding=True), **cfg.model_dump()},
        "cluster": {"gpus": gpus, **gpu.to_dict()},
        "precision": precision,
        "seq_len": seq_len,
        "micro_batch": micro_batch,
        "layout": {
            "name": chosen.name,
            "zero_level": chosen.zero_level,
            "dp": chosen.dp,
            **chosen.degrees(),
            "pp_schedule": chosen.schedule if chosen.pp > 1 else None,
            "pp_stages_per_rank": chosen.stages_per_rank,
            "bubble": chosen.bubble,
            "checkpointing": chosen.checkpointing,
            "compiled": chosen.compiled,
            "grad_accum": chosen.grad_accum,
            "no_sync_accumulation": no_sync,
            "reshard_after_forward": chosen.zero_level != "zero2",
            "global_batch": global_batch,
            "tokens_per_step": tokens_per_step,
            "memory": chosen.memory,
            "communication": communication(cfg, chosen, seq_len, precision),
        },
        "decisions": [t.reason for t in tried],
        "breakdown": {str(tp): rows for tp, rows in breakdown.items()},
        "activations_by_checkpointing": act,
        "time": {
            "mfu": mfu,
            "peak_flops": gpu.peak(precision),
            "flops_per_token": flops_per_token(cfg, seq_len, attention_span),
            "recompute_factor": RECOMPUTE[chosen.checkpointing],
            "step_seconds": seconds,
            "step_breakdown": chosen.time,
            "tokens_per_day": tokens_per_day,
            "target_tokens": tokens,
            "target_source": tokens_source,
            "steps": math.ceil(tokens / tokens_per_step),
            "days": tokens / tokens_per_day,
            "unique_tokens": unique_tokens,
            "epochs": tokens / unique_tokens if unique_tokens else None,
        },
    }


def train_config(result: dict, cfg: ModelConfig, data: list[str], out_dir: str) -> TrainConfig:
    """The chosen layout as a ``pretrain train`` config, every degree named (DDP is ``dp_replicate``), with the
    plan's learning rate, batch and warmup."""
    lay, hyper = result["layout"], result["hyperparameters"]
    return TrainConfig.model_validate(
        {
            "model": cfg.model_dump(),
            "data": {
                "sources": [{"path": p} for p in data],
                **({"document_mask": True} if "document_mask" in result else {}),
            },
            "seq_len": result["seq_len"],
            "micro_batch_size": result["micro_batch"],
            "global_batch_size": lay["global_batch"],
            "max_tokens": int(result["time"]["target_tokens"]),
            "precision": result["precision"],
            "device": "auto",
            "parallel": {
                "dp_replicate": lay["dp_replicate"],
                "dp_shard": lay["dp_shard"],
                "tp": lay["tp"],
                "pp": lay["pp"],
                "cp": lay["cp"],
                "activation_checkpointing": lay["checkpointing"],
                "compile": lay["compiled"],
                "loss_parallel": lay["tp"] > 1,
                "no_sync_accumulation": lay["no_sync_accumulation"] and lay["pp"] == 1,
                "reshard_after_forward": lay["reshard_after_forward"],
                "offload": lay["offload"],
                "shard_optimizer": lay["shard_optimizer"],
                **(
                    {"pp_schedule": lay["pp_schedule"], "pp_stages_per_rank": lay["pp_stages_per_rank"]}
                    if lay["pp"] > 1
                    else {}
                ),
            },
            "optim": {"lr": hyper["learning_rate"], "warmup_steps": hyper["warmup_steps"]},
            "out_dir": out_dir,
            "planned": {
                "global_batch_size": lay["global_batch"],
                "law_lr": hyper["law"]["learning_rate"],
                "step_seconds": result["time"]["step_seconds"],
            },
            **(
                {
                    "checkpoint": {
                        "every_steps": result["checkpoint_interval"]["every_steps"],
                        "async_save": result["checkpoint_interval"]["async_save"],
                    }
                }
                if "checkpoint_interval" in result
                else {}
            ),
        }
    )
