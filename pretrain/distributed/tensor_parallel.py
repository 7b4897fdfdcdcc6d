"""Tensor parallel (Megatron style, with sequence parallel) applied to the model from outside."""

from __future__ import annotations

from torch import nn
from torch.distributed.device_mesh import DeviceMesh


def apply_tp(model: nn.Module, tp_mesh: DeviceMesh, loss_parallel: bool) -> None:
    """Megatron-style TP with sequence parallel: q/k/v and the two up projections colwise, the output and
    down projections rowwise; norms run on sequence shards; the output head is colwise, its logits left
    sharded over the vocabulary when ``loss_parallel`` (the loss must then run under ``loss_parallel()``)."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    # the divisibilities TP needs (heads, sequence) are checked when the config loads (TrainConfig)
    root_plan = {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "output": ColwiseParallel(
            input_layouts=Shard(1),
            output_layouts=Shard(-1) if loss_parallel else Replicate(),
            use_local_output=not loss_parallel,
        ),
    }
    # a pipeline stage lacks the embeddings or the head: it passes sequence shards between stages
    parallelize_module(model, tp_mesh, {k: v for k, v in root_plan.items() if getattr(model, k) is not None})
    block_plan = {
        "attention_norm": SequenceParallel(),
        "attention": PrepareModuleInput(input_layouts=(Shard(1), None), desired_input_layouts=(Replicate(), None)),
        "attention.wq": ColwiseParallel(),
        "attention.wk": ColwiseParallel(),
        "attention.wv": ColwiseParallel(),
        "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
        "ffn_norm": SequenceParallel(),
        "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "feed_forward.w1": ColwiseParallel(),
        "feed_forward.w3": ColwiseParallel(),
        "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
    }
    for block in model.layers.values():
        if block.attention.q_norm is not None:
            # per-head norms see this rank's heads (dim 2 of batch x seq x heads x head_dim); their weight is
            # replicated and its gradient summed over the tensor-parallel ranks
            block_plan |= {
                f"attention.{norm}": SequenceParallel(sequence_dim=2, use_local_output=True)
                for norm in ("q_norm", "k_norm")
            }
        parallelize_module(block, tp_mesh, block_plan)
