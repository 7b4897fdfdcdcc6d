"""Activation checkpointing of each block: whole blocks, or selective (keep matmul outputs, recompute the rest)."""

from __future__ import annotations

from functools import partial

import torch
from torch import nn

# What selective checkpointing keeps (torchtitan's list): matmul outputs, every attention kernel (the CPU
# one included, so a CPU test sees the same policy as a GPU run), and the tensor-parallel reduce-scatter
# (recomputing it would repeat a collective in the backward pass).
SELECTIVE_KEEP = {
    torch.ops.aten.mm.default,
    torch.ops.aten._scaled_dot_product_efficient_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention.default,
    torch.ops.aten._scaled_dot_product_cudnn_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
    torch.ops._c10d_functional.reduce_scatter_tensor.default,
}


def _save_matmuls_policy():
    """Selective checkpointing: keep what ``SELECTIVE_KEEP`` names, recompute the cheap rest."""
    from torch.utils.checkpoint import CheckpointPolicy

    keep = SELECTIVE_KEEP

    def policy(ctx, op, *args, **kwargs):
        return CheckpointPolicy.MUST_SAVE if op in keep else CheckpointPolicy.PREFER_RECOMPUTE

    return policy


def apply_activation_checkpointing(model: nn.Module, mode: str) -> None:
    """ "block": recompute each block in the backward pass; "selective": recompute only non-matmul ops."""
    if mode == "none":
        return
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    kwargs = {"preserve_rng_state": False}
    if mode == "selective":
        kwargs["context_fn"] = partial(create_selective_checkpoint_contexts, _save_matmuls_policy())
    for name, block in list(model.layers.items()):
        model.layers[name] = checkpoint_wrapper(block, **kwargs)
