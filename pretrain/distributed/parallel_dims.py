"""The parallel degrees of a run: ``ParallelDims`` holds them and builds the ``DeviceMesh`` ("pp",
"dp_replicate", "dp_shard", "cp", "tp", outermost first); everything else asks it. Applying parallelism to
a model is pretrain/distributed/parallelize.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from dataprep.core.errors import UsageError
from pretrain.config.parallel import ParallelConfig

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
    shard_optimizer: bool = False  # ZeRO-1 over dp_replicate: plain replicated weights, no FSDP
    mesh: DeviceMesh | None = field(default=None, repr=False)
    flat: dict[str, DeviceMesh] = field(default_factory=dict, repr=False)  # the flattened dimensions

    @classmethod
    def from_config(cls, cfg: ParallelConfig, world_size: int) -> "ParallelDims":
        """Resolve ``dp_shard: -1`` to the world size over the other degrees and check the product equals
        the world size."""
        others = cfg.dp_replicate * cfg.cp * cfg.tp * cfg.pp
        if world_size % others:
            raise UsageError(
                f"parallel dp_replicate={cfg.dp_replicate} x cp={cfg.cp} x tp={cfg.tp} x pp={cfg.pp} "
                f"does not divide the world size {world_size}"
            )
        dp = world_size // others if cfg.dp_shard == -1 else cfg.dp_shard
        if dp < 1 or dp * others != world_size:
            raise UsageError(
                f"parallel.dp_shard={cfg.dp_shard} x dp_replicate={cfg.dp_replicate} x cp={cfg.cp} x "
                f"tp={cfg.tp} x pp={cfg.pp} must equal the world size {world_size}"
            )
        if cfg.shard_optimizer and dp != 1:
            raise UsageError(
                f"parallel.shard_optimizer (ZeRO-1) replicates the weights: dp_shard resolves to {dp}; set "
                f"dp_replicate to the data-parallel degree ({dp * cfg.dp_replicate})"
            )
        return cls(
            dp_shard=dp,
            tp=cfg.tp,
            world_size=world_size,
            dp_replicate=cfg.dp_replicate,
            cp=cfg.cp,
            pp=cfg.pp,
            shard_optimizer=cfg.shard_optimizer and cfg.dp_replicate > 1,
        )

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
        nothing is sharded). Not under ZeRO-1 (``shard_optimizer``): plain weights, gradients averaged by hand."""
        if self.shard_optimizer:
            return False
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
            self.flat = {
                "dp": mesh["dp_replicate", "dp_shard"]._flatten("dp"),
                "dp_shard_cp": mesh["dp_shard", "cp"]._flatten("dp_shard_cp"),
            }
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

    def zero1_group(self) -> dist.ProcessGroup | None:
        """The group ZeRO-1 shards AdamW's moments over and averages gradients across; None without it."""
        return self.group("dp_replicate") if self.shard_optimizer else None

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
