"""The training config's ``parallel:`` section: the mesh's degrees and how each dimension runs; the degrees'
own rules come from ``pretrain.layout_rules``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from dataprep.core.validation import StrictModel
from pretrain.layout_rules import PP_SCHEDULES, check_layout


class ParallelConfig(StrictModel):
    """The mesh ``pp x dp_replicate x dp_shard x cp x tp`` (outermost first) and how each dimension runs."""

    dp_replicate: int = Field(1, gt=0, description="replicated data parallel: DDP, or HSDP with dp_shard > 1")
    dp_shard: int = Field(-1, description="FSDP degree; -1 = the world size over the other degrees")
    tp: int = Field(1, gt=0)
    cp: int = Field(1, gt=0, description="context parallel: each sequence split over cp ranks")
    pp: int = Field(1, gt=0, description="pipeline parallel: the blocks split into pp stages")
    pp_schedule: Literal[PP_SCHEDULES] = "1f1b"
    # model chunks per pipeline rank: 1 for gpipe/1f1b, >= 2 for the interleaved schedules. (torch's ZB-V
    # schedule is left out: its forward-only pass, our validation, fails in torch 2.13.)
    pp_stages_per_rank: int = Field(1, gt=0)
    activation_checkpointing: Literal["none", "block", "selective"] = "none"
    compile: bool = False
    loss_parallel: bool = False
    # Gradient accumulation with FSDP: by default gradients are reduce-scattered after every micro-batch
    # (torchtitan's choice: each rank holds only its gradient shard). no_sync_accumulation reduces once
    # per step instead, keeping a full unsharded fp32 gradient on every rank until then (less
    # communication, much more memory; ``pretrain plan --no-sync-accumulation`` counts it).
    no_sync_accumulation: bool = False
    # false: ZeRO-2-like, the gathered weights stay between forward and backward (no second all-gather,
    # one unsharded copy of the weights held per block)
    reshard_after_forward: bool = True
    # FSDP2's CPUOffloadPolicy: sharded weights, gradients and optimizer states live in host memory (CUDA)
    offload: bool = False
    # ZeRO-1: replicated weights and gradients over dp_replicate ranks, AdamW's moments sharded over them
    # (pretrain/distributed/zero1.py)
    shard_optimizer: bool = False

    @model_validator(mode="after")
    def _check_combinations(self) -> "ParallelConfig":
        check_layout(self)  # the rules of the degrees alone; the training config adds the model's
        return self

    @property
    def num_stages(self) -> int:
        return self.pp * self.pp_stages_per_rank if self.pp > 1 else 1
