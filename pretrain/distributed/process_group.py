"""Joining the process group torchrun starts, and the two questions every rank asks of it (its rank; wait
for the others). Outside torchrun each answers as a single process."""

from __future__ import annotations

import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist


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
        print(
            "[train] warning: torchrun --max-restarts shares its rendezvous store with the workers, and "
            "restarted workers may then fail to connect (pytorch/pytorch#135712): export "
            "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 before torchrun",
            file=sys.stderr,
            flush=True,
        )
    return rank, local, world


def _restarts_share_the_store() -> bool:
    """Whether torchrun may restart these workers and hands them its own rendezvous store."""
    return (
        int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0")) > 0
        and os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    )


def global_rank() -> int:
    """This process's rank in the world (0 outside torchrun)."""
    return dist.get_rank() if dist.is_initialized() else 0


def barrier() -> None:
    """Wait for every rank (nothing to wait for outside torchrun)."""
    if dist.is_initialized():
        dist.barrier()
