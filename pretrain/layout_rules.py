"""Which parallel layouts the trainer runs: one list of rules for the config, the trainer and the planner.

The config checks what it can when it loads (the world size is known then only when every degree is
given); the trainer checks again once ``dp_shard: -1`` is resolved and the device is known; the planner
proposes no layout these rules refuse. No torch here, so the config can import it.
"""

from __future__ import annotations

from typing import Any

from dataprep.core.errors import UsageError

PP_SCHEDULES = ("gpipe", "1f1b", "interleaved_1f1b", "interleaved_zero_bubble")
MULTI_STAGE_SCHEDULES = ("interleaved_1f1b", "interleaved_zero_bubble")  # several stages per rank


def world_size_of(parallel: Any, world_size: int | None = None) -> int | None:
    """The run's world size: given (the trainer's), or the product of the degrees when every one is set."""
    if world_size is not None:
        return world_size
    if parallel.dp_shard == -1:
        return None
    return parallel.dp_replicate * parallel.dp_shard * parallel.cp * parallel.tp * parallel.pp


def layout_problems(
    parallel: Any,
    model: Any = None,
    *,
    seq_len: int | None = None,
    precision: str | None = None,
    micro_batch: int | None = None,
    global_batch: int | None = None,
    world_size: int | None = None,
    device_type: str | None = None,
    document_mask: bool = False,
) -> list[str]:
    """Every rule the layout breaks, as messages in the order they are checked. ``parallel`` is a
    ``ParallelConfig`` (or anything with its fields); a rule whose inputs are not given yet is skipped."""
    problems = _degree_problems(parallel)
    if model is not None:
        problems += _model_problems(parallel, model, world_size_of(parallel, world_size))
    if seq_len is not None:
        problems += _sequence_problems(parallel, seq_len)
    if document_mask and parallel.cp > 1:
        problems.append(
            "data.document_mask does not combine with context parallelism yet: set parallel.cp to 1, "
            "or data.document_mask: false"
        )
    if precision == "fp16" and parallel.pp > 1:
        problems.append(
            "precision fp16 is not supported with pipeline parallelism (no loss scaling across stages): use bf16"
        )
    if micro_batch is not None and global_batch is not None:
        problems += _batch_problems(parallel, micro_batch, global_batch)
    if (
        device_type is not None
        and parallel.offload
        and (device_type != "cuda" or not _fsdp_ranks(parallel, world_size))
    ):
        problems.append(
            "parallel.offload moves FSDP's shards to host memory: it needs CUDA and more than one data-parallel rank"
        )
    return problems


def check_layout(parallel: Any, model: Any = None, **known) -> None:
    """Raise ``ValueError`` with the first rule the layout breaks (inside a pydantic validator it becomes
    the config's error, naming the field)."""
    problems = layout_problems(parallel, model, **known)
    if problems:
        raise UsageError(problems[0])


def _degree_problems(par: Any) -> list[str]:
    problems = []
    if par.dp_shard == 0 or par.dp_shard < -1:
        problems.append(f"parallel.dp_shard must be -1 or a positive degree, got {par.dp_shard}")
    if par.loss_parallel and par.tp == 1:
        problems.append("parallel.loss_parallel needs tp > 1")
    if par.compile and par.tp > 1:  # fails in the backward pass (DTensor inside compiled blocks)
        problems.append(
            "parallel.compile is not supported with tensor parallelism (tp > 1): "
            "compile with FSDP only, or set compile: false"
        )
    multi = par.pp_schedule in MULTI_STAGE_SCHEDULES
    if par.pp > 1 and multi and par.pp_stages_per_rank < 2:
        problems.append(f"parallel.pp_schedule {par.pp_schedule} needs pp_stages_per_rank >= 2")
    if par.pp > 1 and not multi and par.pp_stages_per_rank != 1:
        problems.append(
            f"parallel.pp_schedule {par.pp_schedule} runs one stage per rank: "
            "set pp_stages_per_rank: 1 or choose interleaved_1f1b"
        )
    if par.pp > 1 and par.pp_schedule == "interleaved_zero_bubble" and (par.dp_shard > 1 or par.dp_replicate > 1):
        # measured: the split backward (input gradients first, weight gradients later) reaches FSDP's
        # gradient reduction incomplete in torch 2.13, and the gradients come out wrong
        problems.append(
            "parallel.pp_schedule interleaved_zero_bubble does not compose with FSDP in torch "
            "2.13: set dp_shard: 1 and dp_replicate: 1, or use interleaved_1f1b"
        )
    if par.pp > 1 and par.no_sync_accumulation:
        problems.append(
            "parallel.no_sync_accumulation does not apply with pp > 1: the pipeline schedule "
            "reduces gradients after the last micro-batch itself"
        )
    if getattr(par, "shard_optimizer", False) and (
        par.dp_shard not in (-1, 1) or par.tp > 1 or par.cp > 1 or par.pp > 1 or par.offload
    ):
        problems.append(
            "parallel.shard_optimizer (ZeRO-1) shards AdamW's moments over replicated weights: set "
            "dp_replicate to the data-parallel degree, dp_shard 1 (or -1), and tp, cp, pp 1, no offload"
        )
    if par.cp > 1 and (par.pp > 1 or par.compile):
        problems.append("parallel.cp > 1 does not combine with pp > 1 or compile yet")
    return problems


def _model_problems(par: Any, model: Any, world: int | None) -> list[str]:
    problems = [
        f"parallel.tp={par.tp} must divide model.{name}={getattr(model, name)}"
        for name in ("n_heads", "n_kv_heads")
        if getattr(model, name) % par.tp
    ]
    if model.tie_embeddings and (par.tp > 1 or par.pp > 1 or (world or 1) > 1):
        problems.append(
            "model.tie_embeddings is supported in single-process training only (FSDP/TP would shard "
            "the shared weight twice): set model.tie_embeddings: false or train on one process"
        )
    if model.z_loss and par.pp > 1:
        problems.append(
            "model.z_loss is not supported with pipeline parallelism (the schedules' loss is the "
            "cross-entropy alone): set parallel.pp=1 or model.z_loss=0"
        )
    stages = par.pp * par.pp_stages_per_rank if par.pp > 1 else 1
    if model.n_layers < stages:
        problems.append(
            f"model.n_layers={model.n_layers} cannot fill {stages} pipeline "
            f"stages (pp {par.pp} x pp_stages_per_rank {par.pp_stages_per_rank})"
        )
    return problems


def _sequence_problems(par: Any, seq_len: int) -> list[str]:
    tp, cp = par.tp, par.cp
    problems = []
    if seq_len % (tp * cp):  # sequence parallel splits every sequence (or cp chunk) tp ways
        problems.append(
            f"seq_len {seq_len} must be divisible by parallel.tp={tp}"
            + (f" x cp={cp}" if cp > 1 else "")
            + " (sequence parallel)"
        )
    if cp > 1 and seq_len % (2 * cp):
        problems.append(
            f"seq_len {seq_len} must be divisible by 2 x parallel.cp={cp}: each rank holds "
            "one chunk from each end of the sequence (load-balanced causal attention)"
        )
    return problems


def _batch_problems(par: Any, micro_batch: int, global_batch: int) -> list[str]:
    dp = par.dp_replicate * max(par.dp_shard, 1)  # dp_shard -1: known once the world size is
    per_step = micro_batch * dp
    if global_batch % per_step:
        return [
            f"global_batch_size {global_batch} must be a multiple of micro_batch_size "
            f"{micro_batch}" + (f" x data-parallel degree {dp}" if dp > 1 else "")
        ]
    micro_batches = global_batch // per_step
    if par.pp > 1 and par.dp_shard != -1 and micro_batches < par.pp and par.pp_schedule != "gpipe":
        return [
            f"{micro_batches} micro-batches per step cannot fill {par.pp} pipeline ranks "
            f"({par.pp_schedule}): raise global_batch_size or lower micro_batch_size"
        ]
    return []


def _fsdp_ranks(par: Any, world_size: int | None) -> bool:
    """Whether more than one data-parallel rank holds FSDP shards (offload streams them from host memory)."""
    world = world_size_of(par, world_size)
    if world is None:
        return True
    dp_shard = par.dp_shard if par.dp_shard != -1 else world // (par.dp_replicate * par.cp * par.tp * par.pp)
    return par.dp_replicate * dp_shard * par.cp > 1
