"""How the weights are updated: AdamW, its learning-rate schedule and gradient clipping."""

from __future__ import annotations

import math

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from pretrain.config.optim import OptimConfig


def build_optimizer(
    model: torch.nn.Module, opt: OptimConfig, precision: str = "fp32", shard_over=None
) -> torch.optim.Optimizer:
    """AdamW; weight decay on matrices (and embeddings), none on 1-D tensors (norm gains). Fused (one
    kernel, and a skipped step decided on the device through its ``found_inf``) wherever the parameters
    live on the GPU, and on the CPU except under fp16 (torch's CPU fused AdamW rejects the loss scaler's
    found_inf on sharded parameters). ``shard_over``: a process group whose ranks each keep the moments of
    their share of the parameters (ZeRO-1, pretrain/distributed/zero1.py)."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": opt.weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    fused = all(p.device.type == "cuda" for p in params) or (
        precision != "fp16" and all(p.device.type in ("cuda", "cpu") for p in params)
    )
    if shard_over is not None:
        from pretrain.distributed.zero1 import build_zero1

        return build_zero1(groups, shard_over, lr=opt.lr, betas=opt.betas, eps=opt.eps, fused=fused)
    return torch.optim.AdamW(groups, lr=opt.lr, betas=opt.betas, eps=opt.eps, fused=fused)


def lr_factor(step: int, total: int, opt: OptimConfig) -> float:
    """Multiplier of the peak lr at ``step`` (0-based): linear warmup, then cosine to ``min_lr_ratio`` at
    ``total``, or warmup-stable-decay (linear decay over the last ``decay_fraction`` of steps), or constant."""
    if step < opt.warmup_steps:
        return (step + 1) / opt.warmup_steps
    floor = opt.min_lr_ratio
    if opt.schedule == "constant":
        return 1.0
    if opt.schedule == "cosine":
        progress = min(1.0, (step - opt.warmup_steps) / max(1, total - opt.warmup_steps))
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))
    decay_steps = max(1, round(opt.decay_fraction * total))
    start = total - decay_steps
    if step < start:
        return 1.0
    return 1.0 - (1.0 - floor) * min(1.0, (step - start + 1) / decay_steps)


def build_lr_scheduler(
    optimizer: torch.optim.Optimizer, total: int, opt: OptimConfig
) -> torch.optim.lr_scheduler.LambdaLR:
    """The schedule of ``lr_factor`` over ``total`` steps, stepped once per optimizer step."""
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: lr_factor(step, total, opt))


def clip_grad_norm(params: list[torch.Tensor], max_norm: float, pp_group=None) -> torch.Tensor:
    """Global gradient norm over all ranks (DTensor-aware; summed over pipeline stages when ``pp_group``),
    and clipping to ``max_norm`` when > 0."""
    grads = [p.grad for p in params if p.grad is not None]
    norm = torch.nn.utils.get_total_norm(grads, foreach=True)
    if isinstance(norm, DTensor):
        norm = norm.full_tensor()
    if pp_group is not None:
        norm = norm**2
        dist.all_reduce(norm, group=pp_group)
        norm = norm.sqrt()
    if max_norm > 0:
        torch.nn.utils.clip_grads_with_norm_(params, max_norm, norm, foreach=True)
    return norm
