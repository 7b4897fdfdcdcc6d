"""Parallelism applied to a model from outside, torchtitan style: tensor parallel, activation
checkpointing, compile, then FSDP2 (or HSDP/DDP), each in its own small function. Pipeline stages
(pretrain/distributed/pipeline_parallel.py) and context parallel attention (pretrain/distributed/context_parallel.py) live beside it.

``ParallelDims`` holds the degrees and builds the ``DeviceMesh`` ("pp", "dp_replicate", "dp_shard", "cp",
"tp", outermost first); everything else asks it. The same code runs on CUDA with NCCL and on CPU with gloo
(our tests).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from typing import NamedTuple

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from pretrain.config import ParallelConfig

MESH_DIMS = ("pp", "dp_replicate", "dp_shard", "cp", "tp")


class DataParallel(NamedTuple):
    """This rank's place among the data-parallel ranks: the group to reduce over (None when alone)."""

    group: dist.ProcessGroup | None
    rank: int
    size: int


@dataclass
class ParallelDims:
    """The parallel degrees and, once built, their ``DeviceMesh``: the one place that answers "is FSDP
    on?" or "which group is data parallel?"."""

    dp_shard: int
    tp: int
    world_size: int
    dp_replicate: int = 1
    cp: int = 1
    pp: int = 1
    single_rank_fsdp: bool = False  # FSDP2 wrapping on one process (benchmarks: its policy and gathers, unsharded)
    mesh: DeviceMesh | None = field(default=None, repr=False)
    flat: dict[str, DeviceMesh] = field(default_factory=dict, repr=False)  # the flattened dimensions

    @classmethod
    def from_config(cls, cfg: ParallelConfig, world_size: int) -> "ParallelDims":
        """Resolve ``dp_shard: -1`` to the world size over the other degrees and check the product equals
        the world size."""
        others = cfg.dp_replicate * cfg.cp * cfg.tp * cfg.pp
        if world_size % others:
            raise ValueError(f"parallel dp_replicate={cfg.dp_replicate} x cp={cfg.cp} x tp={cfg.tp} x pp={cfg.pp} "
                             f"does not divide the world size {world_size}")
        dp = world_size // others if cfg.dp_shard == -1 else cfg.dp_shard
        if dp < 1 or dp * others != world_size:
            raise ValueError(f"parallel.dp_shard={cfg.dp_shard} x dp_replicate={cfg.dp_replicate} x cp={cfg.cp} x "
                             f"tp={cfg.tp} x pp={cfg.pp} must equal the world size {world_size}")
        return cls(dp_shard=dp, tp=cfg.tp, world_size=world_size, dp_replicate=cfg.dp_replicate, cp=cfg.cp,
                   pp=cfg.pp)

    def degrees(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in MESH_DIMS}

    @property
    def dp(self) -> int:
        """Data-parallel ranks (each reads its own samples): replicas x shards."""
        return self.dp_replicate * self.dp_shard

    @property
    def dp_enabled(self) -> bool:
        return self.dp > 1

    @property
    def fsdp_enabled(self) -> bool:
        """FSDP2 holds the weights: sharded over dp_shard x cp, replicated over dp_replicate (HSDP; DDP when
        nothing is sharded)."""
        return self.dp_replicate * self.dp_shard * self.cp > 1 or self.single_rank_fsdp

    @property
    def tp_enabled(self) -> bool:
        return self.tp > 1

    @property
    def cp_enabled(self) -> bool:
        return self.cp > 1

    @property
    def pp_enabled(self) -> bool:
        return self.pp > 1

    def build_mesh(self, device_type: str) -> DeviceMesh | None:
        """The 5-D mesh, kept as ``mesh``, with the flattened dimensions the others need: "dp" (samples),
        "dp_shard_cp" (FSDP), "dp_cp" (loss average); None for a single process."""
        if self.world_size > 1 or self.single_rank_fsdp:
            mesh = init_device_mesh(device_type, tuple(getattr(self, n) for n in MESH_DIMS), mesh_dim_names=MESH_DIMS)
            self.flat = {"dp": mesh["dp_replicate", "dp_shard"]._flatten("dp"),
                         "dp_shard_cp": mesh["dp_shard", "cp"]._flatten("dp_shard_cp")}
            self.mesh = mesh
        return self.mesh

    def submesh(self, name: str) -> DeviceMesh:
        """A dimension of the mesh, or one of the flattened ones ("dp", "dp_shard_cp")."""
        return self.flat[name] if name in self.flat else self.mesh[name]

    def fsdp_mesh(self) -> DeviceMesh:
        """FSDP's mesh: 1-D ("dp_shard_cp") when nothing is replicated, else 2-D (replicate, shard) for HSDP."""
        if self.dp_replicate == 1:
            return self.flat["dp_shard_cp"]
        if self.cp == 1:
            return self.mesh["dp_replicate", "dp_shard"]
        return self.mesh["dp_replicate", "dp_shard_cp"]  # a flattened dimension sliced from the root

    def data_parallel(self) -> DataParallel:
        """The data-parallel group, this rank's index in it and its size (from the mesh)."""
        if self.mesh is None:
            return DataParallel(None, 0, 1)
        dp_mesh = self.flat["dp"]
        return DataParallel(dp_mesh.get_group() if self.dp_enabled else None, dp_mesh.get_local_rank(), self.dp)

    def local_rank(self, dim: str) -> int:
        return 0 if self.mesh is None else self.submesh(dim).get_local_rank()

    def group(self, dim: str) -> dist.ProcessGroup | None:
        """The process group of mesh dimension ``dim`` when it has more than one rank."""
        return self.submesh(dim).get_group() if self.mesh is not None and getattr(self, dim, 2) > 1 else None

    def mean_loss(self, loss: torch.Tensor, holds_loss: bool = True) -> float:
        """The loss averaged over data and context parallel ranks; with pipeline parallelism only the last
        stage ``holds_loss``. One world-wide sum: tensor-parallel ranks hold copies, the other stages zeros."""
        if self.mesh is None:
            return loss.item()
        value = loss.detach().clone() if holds_loss else torch.zeros_like(loss)
        dist.all_reduce(value)  # gloo has no AVG
        return (value / (self.dp * self.cp * self.tp)).item()


def init_distributed(device_type: str, timeout: timedelta | None = None) -> tuple[int, int, int]:
    """Join the torchrun process group if there is one, its collectives timing out after ``timeout``
    (None: the backend's default); returns (rank, local_rank, world_size)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank, local = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    if world > 1 and not dist.is_initialized():
        if device_type == "cuda":
            torch.cuda.set_device(local)
        dist.init_process_group("nccl" if device_type == "cuda" else "gloo", timeout=timeout)
    if rank == 0 and _restarts_share_the_store():
        print("[train] warning: torchrun --max-restarts shares its rendezvous store with the workers, and "
              "restarted workers may then fail to connect (pytorch/pytorch#135712): export "
              "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 before torchrun", file=sys.stderr, flush=True)
    return rank, local, world


def _restarts_share_the_store() -> bool:
    """Whether torchrun may restart these workers and hands them its own rendezvous store."""
    return (int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0")) > 0
            and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True")


def global_rank() -> int:
    """This process's rank in the world (0 outside torchrun)."""
    return dist.get_rank() if dist.is_initialized() else 0


def barrier() -> None:
    """Wait for every rank (nothing to wait for outside torchrun)."""
    if dist.is_initialized():
        dist.barrier()


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
        parallelize_module(block, tp_mesh, block_plan)


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
    """"block": recompute each block in the backward pass; "selective": recompute only non-matmul ops."""
    if mode == "none":
        return
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    kwargs = {"preserve_rng_state": False}
    if mode == "selective":
        kwargs["context_fn"] = partial(create_selective_checkpoint_contexts, _save_matmuls_policy())
    for name, block in list(model.layers.items()):
        model.layers[name] = checkpoint_wrapper(block, **kwargs)


def apply_compile(model: nn.Module) -> None:
    """Compile each block on its own: blocks are identical, so one graph is reused and compile stays fast."""
    for block in model.layers.values():
        block.compile(fullgraph=True)


def apply_fsdp(model: nn.Module, dp_mesh: DeviceMesh, param_dtype: torch.dtype | None,
               reshard_after_forward: bool = True, offload: bool = False) -> None:
    """FSDP2: shard each block, then the root (embeddings, final norm, output). With ``param_dtype``
    (bf16) parameters are gathered in that dtype and gradients reduced in fp32. Forward inputs are not
    cast: the rotary tables every block receives stay fp32, as in the fp32 model an export runs. A 2-D
    ``dp_mesh`` (replicate, shard) is HSDP: gradients are reduce-scattered within a replica and all-reduced
    across replicas. ``reshard_after_forward`` false keeps each block's gathered weights until its
    backward (ZeRO-2-like); ``offload`` keeps shards, gradients and optimizer states in host memory."""
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

    mp = (MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32, cast_forward_inputs=False)
          if param_dtype else None)
    kwargs = {"mesh": dp_mesh} | ({"mp_policy": mp} if mp else {})
    if offload:
        kwargs["offload_policy"] = CPUOffloadPolicy()
    blocks = list(model.layers.values())
    for i, block in enumerate(blocks):
        # the last block's parameters are needed again at once by the backward pass: keep them gathered
        fully_shard(block, reshard_after_forward=reshard_after_forward and i < len(blocks) - 1, **kwargs)
    # the root keeps fully_shard's own default (kept gathered after forward) unless ZeRO-2 asks the same
    fully_shard(model, **kwargs, **({} if reshard_after_forward else {"reshard_after_forward": False}))


def parallelize(model: nn.Module, dims: ParallelDims, cfg: ParallelConfig,
                param_dtype: torch.dtype | None = None, seq_len: int | None = None) -> nn.Module:
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
