"""Parallelism applied to a model from outside, torchtitan style: tensor parallel, context parallel
attention, activation checkpointing, compile, then FSDP2 (or HSDP/DDP), each mechanism in its own module
beside this one (tensor_parallel.py, context_parallel.py, activation_checkpoint.py, compile.py, fsdp.py);
pipeline stages are pipeline_parallel.py. The same code runs on CUDA with NCCL and on CPU with gloo (our
tests)."""

from __future__ import annotations

import torch
from torch import nn

from pretrain.config.parallel import ParallelConfig
from pretrain.distributed.activation_checkpoint import apply_activation_checkpointing
from pretrain.distributed.compile import apply_compile
from pretrain.distributed.fsdp import apply_fsdp
from pretrain.distributed.parallel_dims import ParallelDims
from pretrain.distributed.tensor_parallel import apply_tp


def parallelize(
    model: nn.Module,
    dims: ParallelDims,
    cfg: ParallelConfig,
    param_dtype: torch.dtype | None = None,
    seq_len: int | None = None,
) -> nn.Module:
    """Apply TP, context parallel attention (for sequences of ``seq_len`` tokens), activation
    checkpointing, compile and FSDP, in that order (torchtitan's), on the mesh ``dims`` built."""
    if dims.tp_enabled:
        apply_tp(model, dims.mesh["tp"], cfg.loss_parallel)
    if dims.cp_enabled:
        from pretrain.distributed.context_parallel import apply_cp

        apply_cp(model, dims.mesh["cp"], seq_len)
    apply_activation_checkpointing(model, cfg.activation_checkpointing)
    if cfg.compile:
        apply_compile(model)
    if dims.fsdp_enabled:
        apply_fsdp(model, dims.fsdp_mesh(), param_dtype, cfg.reshard_after_forward, cfg.offload)
    return model
