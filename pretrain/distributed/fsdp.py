"""FSDP2 (or HSDP/DDP) wrapping of each block, then the root."""

from __future__ import annotations

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh


def apply_fsdp(
    model: nn.Module,
    dp_mesh: DeviceMesh,
    param_dtype: torch.dtype | None,
    reshard_after_forward: bool = True,
    offload: bool = False,
) -> None:
    """FSDP2: shard each block, then the root (embeddings, final norm, output). With ``param_dtype``
    (bf16) parameters are gathered in that dtype and gradients reduced in fp32. Forward inputs are not
    cast: the rotary tables every block receives stay fp32, as in the fp32 model an export runs. A 2-D
    ``dp_mesh`` (replicate, shard) is HSDP: gradients are reduce-scattered within a replica and all-reduced
    across replicas. ``reshard_after_forward`` false keeps each block's gathered weights until its
    backward (ZeRO-2-like); ``offload`` keeps shards, gradients and optimizer states in host memory."""
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

    mp = (
        MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32, cast_forward_inputs=False)
        if param_dtype
        else None
    )
    kwargs = {"mesh": dp_mesh} | ({"mp_policy": mp} if mp else {})
    if offload:
        kwargs["offload_policy"] = CPUOffloadPolicy()
    blocks = list(model.layers.values())
    for i, block in enumerate(blocks):
        # the last block's parameters are needed again at once by the backward pass: keep them gathered
        fully_shard(block, reshard_after_forward=reshard_after_forward and i < len(blocks) - 1, **kwargs)
    # the root keeps fully_shard's own default (kept gathered after forward) unless ZeRO-2 asks the same
    fully_shard(model, **kwargs, **({} if reshard_after_forward else {"reshard_after_forward": False}))
