"""ZeRO-1 (``parallel.shard_optimizer``): every data-parallel rank holds the whole model and its gradients,
but AdamW's moments only for its share of the parameters (torch's ``ZeroRedundancyOptimizer`` over the
replicate dimension): each rank updates its share and broadcasts it. For a model whose weights and gradients
fit on a GPU but whose Adam states (8 bytes per parameter) do not; FSDP2 has no optimizer-only sharding.

Gradients are averaged over the ranks once per step (``reduce_gradients``, one flat all-reduce) before
clipping. A checkpoint holds each rank's share of the optimizer state by parameter name, in the flat form
``torch.distributed.checkpoint.state_dict`` writes for the other layouts (``state.NAME.exp_avg``,
``param_groups.NAME.lr``), so a run resumes at another data-parallel size, or in another layout.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer

from pretrain.models.llama import parameter_name

GROUP_KEYS = ("lr", "betas", "eps", "weight_decay", "initial_lr")  # what a resume restores of each group


def build_zero1(groups: list[dict], group, **adamw) -> ZeroRedundancyOptimizer:
    """AdamW over ``groups`` (weight decay per group), its state partitioned over the ranks of ``group``."""
    return ZeroRedundancyOptimizer(groups, optimizer_class=torch.optim.AdamW, process_group=group, **adamw)


@torch.no_grad()
def reduce_gradients(params: list[torch.Tensor], group) -> None:
    """Average every gradient over the ranks of ``group``, in one flat buffer."""
    grads = [p.grad for p in params if p.grad is not None]
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat, group=group)
    flat /= dist.get_world_size(group)
    offset = 0
    for g in grads:
        g.copy_(flat[offset : offset + g.numel()].view_as(g))
        offset += g.numel()


def _local_named(model: torch.nn.Module, zero: ZeroRedundancyOptimizer) -> list[tuple[str, torch.Tensor, dict]]:
    """(name, parameter, its param group) of the parameters this rank's optimizer updates. The group is the
    global one, which the scheduler moves (the local copy catches up only inside ``step``)."""
    names = {id(p): parameter_name(n) for n, p in model.named_parameters()}
    return [(names[id(p)], p, zero.param_groups[i]) for i, g in enumerate(zero.optim.param_groups) for p in g["params"]]


def zero1_state_dict(model: torch.nn.Module, zero: ZeroRedundancyOptimizer) -> dict:
    """This rank's share of the optimizer state, flat and by parameter name (the keys of no other rank)."""
    out = {}
    for name, p, group in _local_named(model, zero):
        for key, value in zero.optim.state.get(p, {}).items():
            out[f"state.{name}.{key}"] = value
        out |= {f"param_groups.{name}.{key}": group[key] for key in GROUP_KEYS if key in group}
    return out


def zero1_load_target(model: torch.nn.Module, zero: ZeroRedundancyOptimizer) -> dict:
    """The entries this rank reads back: its share's moments and step, allocated, and its groups' values."""
    out = {}
    for name, p, group in _local_named(model, zero):
        out[f"state.{name}.step"] = torch.zeros((), dtype=torch.float32, device=p.device)
        out[f"state.{name}.exp_avg"] = torch.zeros_like(p)
        out[f"state.{name}.exp_avg_sq"] = torch.zeros_like(p)
        out |= {f"param_groups.{name}.{key}": group[key] for key in GROUP_KEYS if key in group}
    return out


def load_zero1_state_dict(model: torch.nn.Module, zero: ZeroRedundancyOptimizer, state: dict) -> None:
    """Set this rank's share from ``state`` (``zero1_load_target``'s entries, filled); the groups' values go
    to the global groups, which ``step`` copies to the local ones."""
    for name, p, group in _local_named(model, zero):
        zero.optim.state[p] = {key: state[f"state.{name}.{key}"] for key in ("step", "exp_avg", "exp_avg_sq")}
        for key in GROUP_KEYS:
            if f"param_groups.{name}.{key}" in state:
                group[key] = state[f"param_groups.{name}.{key}"]
