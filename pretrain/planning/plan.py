"""The planner behind ``pretrain plan``: the fastest parallel layout that fits, walking the decision tree
with reasons, and time to train (the command: ``pretrain/commands/plan.py``; its tables: ``plan_report.py``).

The walk (``plan_layouts.candidates``) goes from simplest to most involved: DDP; ZeRO-2; FSDP (ZeRO-3); a
micro-batch of 1 before any recomputation; for long sequences context parallel first; selective then block
checkpointing; tensor parallel within a node; pipeline parallel across nodes (interleaving stages until
the bubble is under ``--max-bubble``); context parallel; CPU offload last. Each layout's memory,
communication and step time come from ``pretrain/planning/plan_memory.py`` (its docstring holds the accounting):
of the layouts that fit, the one with the least estimated time per token wins (the earlier in the walk on
a tie), so a layout that sends terabytes per step over the nodes' NICs loses to one that keeps its traffic
on NVLink. The result it returns, and the training config written from it: ``plan_result.py``.
"""

import math

from dataprep.core.errors import UsageError
from dataprep.core.units import human
from pretrain.config.model import ModelConfig
from pretrain.models.documents import attention_span, block_mask_bytes
from pretrain.models.llama import num_params
from pretrain.planning.budget import METHODS, estimate, params_of_model
from pretrain.planning.flops import deepseek_flops_per_token
from pretrain.planning.hardware import GPUSpec
from pretrain.planning.hyperparameters import Hyperparameters, optimal_hyperparameters, warmup_steps
from pretrain.planning.plan_layouts import Layout, candidates, pipeline_schedule, reason_for, runnable
from pretrain.planning.plan_memory import GB, PRECISIONS, communication, layout_memory, step_time
from pretrain.planning.plan_result import plan_result


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
    _check_inputs(
        cfg,
        gpus=gpus,
        micro_batch=micro_batch,
        gpus_per_node=gpus_per_node,
        seq_len=seq_len,
        global_batch=global_batch,
        mfu=mfu,
        max_bubble=max_bubble,
        tokens=tokens,
        lr=lr,
        precision=precision,
    )
    tokens, tokens_source = _target_tokens(cfg, seq_len, tokens, method, tokens_source)
    law = optimal_hyperparameters(deepseek_flops_per_token(cfg, seq_len) * tokens, seq_len)
    tried: list[Layout] = []
    for layout in runnable(
        candidates(cfg, gpus, gpus_per_node, micro_batch, seq_len),
        cfg,
        gpus=gpus,
        gpu=gpu,
        seq_len=seq_len,
        precision=precision,
        document_mask=document_tokens is not None,
    ):
        layout.grad_accum = _accum_steps(global_batch, law, layout)
        _assess(
            layout,
            tried[-1] if tried else None,
            cfg,
            gpu=gpu,
            gpus=gpus,
            gpus_per_node=gpus_per_node,
            seq_len=seq_len,
            precision=precision,
            no_sync=no_sync,
            mfu=mfu,
            max_bubble=max_bubble,
            document_tokens=document_tokens,
            span=span,
        )
        tried.append(layout)
    chosen = _fastest(tried, cfg, gpus, gpu)
    _check_choice(chosen, global_batch, show_tp, gpus)
    result = plan_result(
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
        gpus_per_node=gpus_per_node,
        attention_span=span,
        document_tokens=document_tokens,
    )
    result["hyperparameters"] = _hyperparameters(
        law, result, lr=lr, batch_given=global_batch is not None, flops_per_token=deepseek_flops_per_token(cfg, seq_len)
    )
    return result


def _check_inputs(
    cfg: ModelConfig,
    *,
    gpus: int,
    micro_batch: int,
    gpus_per_node: int,
    seq_len: int,
    global_batch: int | None,
    mfu: float,
    max_bubble: float,
    tokens: float | None,
    lr: float | None,
    precision: str,
) -> None:
    """Refuse, in one line, a plan input no layout could honour."""
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


def _assess(
    layout: Layout,
    previous: Layout | None,
    cfg: ModelConfig,
    *,
    gpu: GPUSpec,
    gpus: int,
    gpus_per_node: int,
    seq_len: int,
    precision: str,
    no_sync: bool,
    mfu: float,
    max_bubble: float,
    document_tokens: float | None,
    span: float | None,
) -> None:
    """Set ``layout``'s memory, whether it fits, the reason the walk reached it and, when it fits, its step time."""
    _size(
        layout,
        cfg,
        gpu=gpu,
        gpus=gpus,
        seq_len=seq_len,
        precision=precision,
        no_sync=no_sync,
        document_tokens=document_tokens,
    )
    schedule = pipeline_schedule(layout, cfg, max_bubble) if layout.pp > 1 else ""  # names interleaving
    layout.reason = reason_for(layout, previous, gpu.memory_bytes, cfg) + (f"; {schedule}" if schedule else "")
    if layout.fits:
        _time(
            layout,
            cfg,
            gpu=gpu,
            gpus=gpus,
            gpus_per_node=gpus_per_node,
            seq_len=seq_len,
            mfu=mfu,
            precision=precision,
            span=span,
        )


def _check_choice(chosen: Layout, global_batch: int | None, show_tp: int | None, gpus: int) -> None:
    """Refuse a global batch the chosen layout cannot split evenly, and a ``--tp`` to show that cannot be."""
    per_step = chosen.micro_batch * chosen.dp
    if global_batch is not None and global_batch % per_step:
        raise UsageError(
            f"global batch {global_batch} is not a multiple of micro-batch {chosen.micro_batch} x "
            f"{chosen.dp} data-parallel ranks ({chosen.name}); try {_nearest(global_batch, per_step)}"
        )
    if show_tp is not None and (show_tp < 1 or gpus % show_tp):
        raise UsageError(f"--tp {show_tp} does not divide {gpus} GPUs")


def _size(
    layout: Layout,
    cfg: ModelConfig,
    *,
    gpu: GPUSpec,
    gpus: int,
    seq_len: int,
    precision: str,
    no_sync: bool,
    document_tokens: float | None,
) -> None:
    """Set ``layout``'s per-GPU memory and whether it fits on ``gpu``."""
    # compiled blocks where the trainer compiles them: faster, fewer saved activations (docs/gpu.md)
    layout.compiled = gpu.accelerator and layout.tp == layout.cp == layout.pp == 1
    layout.memory = layout_memory(
        cfg,
        layout.zero_level,
        layout.tp,
        layout.checkpointing,
        gpus=gpus,
        seq_len=seq_len,
        precision=precision,
        no_sync=no_sync,
        **layout.memory_settings(),
    )
    if document_tokens:
        layout.memory["document_mask"] = block_mask_bytes(layout.micro_batch, seq_len // layout.cp)
        layout.memory["total"] += layout.memory["document_mask"]
    layout.fits = layout.memory["total"] <= gpu.memory_bytes


def _time(
    layout: Layout,
    cfg: ModelConfig,
    *,
    gpu: GPUSpec,
    gpus: int,
    gpus_per_node: int,
    seq_len: int,
    mfu: float,
    precision: str,
    span: float | None,
) -> None:
    """Set a fitting ``layout``'s tokens per step and step time."""
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


def _fastest(tried: list[Layout], cfg: ModelConfig, gpus: int, gpu: GPUSpec) -> Layout:
    """The fitting layout with the least time per token (the earliest of equals); each fitting layout's
    reason gets its step time and how it compares."""
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
    return chosen


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
