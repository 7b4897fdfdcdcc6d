"""One optimizer step of the training loop, and the validation loss, apart from the run around them
(pretrain/train.py): ``train_step`` is ``accumulate_gradients`` (micro-batches forward/backward, or the
pipeline schedule over them), then ``optimizer_step`` (fp16 unscale, clip, the run's verdict on the step
(the non-finite guard, the spike detector), optimizer and scheduler step). Nothing here reads a value back
to the host: a skipped update is decided on the device. ``TrainStepContext`` holds what a forward pass
needs besides the model.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from pretrain.components.device import configure_attention, configure_matmul
from pretrain.components.diagnostics import LayerDiagnostics
from pretrain.components.loss import cross_entropy, z_loss
from pretrain.components.optimizer import clip_grad_norm
from pretrain.distributed.parallel_dims import ParallelDims
from pretrain.distributed.pipeline_parallel import PipelineParallelModel
from pretrain.distributed.zero1 import reduce_gradients


class TrainStepContext:
    """What a forward pass needs besides the model, decided once: autocast, the attention kernel (fp16),
    TF32 matmuls (tf32), loss parallelism, the fp16 gradient scaler, whether FSDP holds gradients unsharded between
    micro-batches, the pipeline group (grad norm over stages) and this rank's token positions under context
    parallelism. ``nan_loss`` makes this rank's training loss NaN and ``loss_scale`` multiplies it (injected
    faults, for drills)."""

    def __init__(
        self,
        device: torch.device,
        precision: str,
        loss_parallel: bool,
        fsdp: bool,
        no_sync_accumulation: bool = False,
        pp_group=None,
        positions: torch.Tensor | None = None,
        z_loss: float = 0.0,
        document_positions: bool = True,
        grad_group=None,
    ):
        self.device = device
        self.grad_group = grad_group  # ZeRO-1: gradients averaged over this group before clipping
        self.document_positions = document_positions  # with a document mask: positions restart per document
        # the z-loss coefficient; z_total: this step's mean z-loss, on the device (logged apart from the loss)
        self.z_loss, self.z_total, self.micro_batches = z_loss, torch.zeros((), device=device), 1
        self.no_sync = fsdp and no_sync_accumulation
        self.pp_group, self.positions = pp_group, positions
        self.nan_loss = False
        self.loss_scale = 1
        configure_attention(precision, device)
        configure_matmul(precision, device)
        autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
        # with FSDP, bf16 comes from its MixedPrecisionPolicy instead of autocast
        use_autocast = autocast_dtype is not None and not (fsdp and precision == "bf16")
        self.autocast = (
            (lambda: torch.autocast(device.type, dtype=autocast_dtype)) if use_autocast else contextlib.nullcontext
        )
        if loss_parallel:
            from torch.distributed.tensor.parallel import loss_parallel as lp

            self.loss_ctx = lp
        else:
            self.loss_ctx = contextlib.nullcontext
        self.scaler = None
        if precision == "fp16" and dist.is_initialized() and dist.get_world_size() > 1:
            # an overflow on any rank must skip the step on every rank: the found-inf flag is all-reduced
            # over the whole world (plain GradScaler reduces over the first gradient's mesh only)
            from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

            self.scaler = ShardedGradScaler(device.type, process_group=dist.group.WORLD)
        elif precision == "fp16":
            self.scaler = torch.amp.GradScaler(device.type)

    def loss(self, model, batch: torch.Tensor, train: bool = True) -> torch.Tensor:
        """The training objective of one micro-batch (cross-entropy, plus the z-loss when ``train``); a
        micro-batch of (micro, 2, seq_len + 1) holds the ids and each token's document (``data.document_mask``)."""
        batch = batch.to(self.device, non_blocking=True)
        documents = None
        if batch.ndim == 3:
            batch, documents = batch[:, 0], batch[:, 1, :-1]
        inputs, targets = batch[:, :-1], batch[:, 1:]
        if self.positions is not None:  # context parallel: this rank's chunks of each sequence
            inputs, targets = inputs[:, self.positions], targets[:, self.positions]
        with self.autocast():
            logits = model(inputs) if documents is None else model(inputs, documents, self.document_positions)
        with self.loss_ctx():
            loss = cross_entropy(logits, targets)
            if self.z_loss and train:
                z = z_loss(logits)
                self.z_total = (
                    self.z_total + (z.full_tensor() if isinstance(z, DTensor) else z).detach() / self.micro_batches
                )
                loss = loss + self.z_loss * z
        if self.loss_scale != 1:
            loss = loss * self.loss_scale
        return loss * float("nan") if self.nan_loss else loss


def accumulate_gradients(model, micro_batches: list[torch.Tensor], ctx: TrainStepContext) -> torch.Tensor:
    """Forward and backward over this rank's micro-batches; returns the mean loss (no host sync). FSDP
    reduce-scatters each micro-batch's gradients as they come (only the shards accumulate), unless
    ``no_sync_accumulation`` defers that to the last micro-batch. A ``PipelineParallelModel`` runs its schedule
    over them (the loss is then zero on ranks without the last stage)."""
    if isinstance(model, PipelineParallelModel):
        return model.step(micro_batches, ctx)
    total = torch.zeros((), device=ctx.device)
    ctx.z_total, ctx.micro_batches = torch.zeros((), device=ctx.device), len(micro_batches)
    for i, batch in enumerate(micro_batches):
        if ctx.no_sync:
            model.set_requires_gradient_sync(i == len(micro_batches) - 1)
        loss = ctx.loss(model, batch) / len(micro_batches)
        with ctx.loss_ctx():
            (ctx.scaler.scale(loss) if ctx.scaler else loss).backward()
        total += (loss.full_tensor() if isinstance(loss, DTensor) else loss).detach()
    return total


class StepOutcome(NamedTuple):
    loss: torch.Tensor
    grad_norm: torch.Tensor
    skip: torch.Tensor | None  # on the device: 1 where every rank held the update back; None: not judged
    lr: float  # the learning rate the optimizer used (its first group's, before the schedule stepped)


def step_optimizer(optimizer, skip: torch.Tensor | None) -> None:
    """``optimizer.step()`` unless ``skip`` (a 0-d tensor on the device) is set. Fused AdamW takes it as
    ``found_inf`` and leaves weights, moments and step count alone without a host sync; an optimizer
    that cannot (not fused) reads the flag back."""
    if skip is None:
        optimizer.step()
    elif getattr(optimizer, "_step_supports_amp_scaling", False):
        optimizer.found_inf = skip.float()
        try:
            optimizer.step()
        finally:
            optimizer.found_inf = None
    elif not skip.item():
        optimizer.step()


def optimizer_step(
    optimizer,
    scheduler,
    ctx: TrainStepContext,
    grad_clip: float,
    judge: Callable[[torch.Tensor], torch.Tensor | None] | None = None,
    diagnostics: LayerDiagnostics | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None, float]:
    """Unscale (fp16), clip, step; returns the gradient norm, the skip flag and the learning rate the
    optimizer used (read from its param group before the scheduler moves it on). ``judge`` sees the
    gradient norm and returns a flag (on the device; None: step) that holds the update back on every rank:
    the non-finite guard, a loss spike. A skipped step drops its gradients and leaves AdamW's moments
    alone; the schedule advances as for any step. fp16: the scaler skips on inf/nan gradients itself, and
    the flag is read back. ``diagnostics`` (a diagnostic step) sees the unclipped gradients and the weights
    before the update."""
    params = [p for group in optimizer.param_groups for p in group["params"]]
    if ctx.grad_group is not None:
        reduce_gradients(params, ctx.grad_group)
    if ctx.scaler:
        ctx.scaler.unscale_(optimizer)
    if diagnostics is not None:
        diagnostics.gradients()
    grad_norm = clip_grad_norm(params, grad_clip, ctx.pp_group)
    skip = judge(grad_norm) if judge is not None else None
    if ctx.scaler:
        if skip is None or not skip.item():
            ctx.scaler.step(optimizer)
        ctx.scaler.update()
    else:
        step_optimizer(optimizer, skip)
    optimizer.zero_grad(set_to_none=True)
    lr = optimizer.param_groups[0]["lr"]
    scheduler.step()
    return grad_norm, skip, lr


def train_step(
    model,
    optimizer,
    scheduler,
    micro_batches: list[torch.Tensor],
    ctx: TrainStepContext,
    grad_clip: float,
    judge: Callable[[torch.Tensor, torch.Tensor], torch.Tensor | None] | None = None,
    diagnostics: LayerDiagnostics | None = None,
) -> StepOutcome:
    """One optimizer step over this rank's micro-batches: (mean loss, grad norm, skip flag) as tensors.
    ``judge(loss, grad_norm)``, asked on every rank between backward and update, may hold the update back
    (the non-finite guard and the spike detector, pretrain/train.py). ``diagnostics``: armed for this step
    (its probes see the forward pass; ``read`` it after)."""
    loss = accumulate_gradients(model, micro_batches, ctx)
    step_judge = None if judge is None else (lambda grad_norm: judge(loss, grad_norm))
    return StepOutcome(loss, *optimizer_step(optimizer, scheduler, ctx, grad_clip, step_judge, diagnostics))


@torch.no_grad()
def validation_loss(model, loader, n_batches: int, ctx: TrainStepContext, dims: ParallelDims | None) -> float:
    """Mean loss over the first ``n_batches`` global batches of the validation order (the same every time),
    averaged over the ranks of ``dims`` (None: this process alone)."""
    total = torch.zeros((), device=ctx.device)
    for i in range(n_batches):
        micro_batches = loader.batch_at(i * loader.global_batch)
        if isinstance(model, PipelineParallelModel):
            total += model.step(micro_batches, ctx, forward_only=True)
            continue
        for batch in micro_batches:
            loss = ctx.loss(model, batch, train=False)
            total += (loss.full_tensor() if isinstance(loss, DTensor) else loss) / len(micro_batches)
    total /= n_batches
    if dims is None:
        return total.item()
    return dims.mean_loss(total, holds_loss=not isinstance(model, PipelineParallelModel) or model.has_last)
