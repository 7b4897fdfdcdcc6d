"""The training loop: ``pretrain train CONFIG`` (one process) or
``torchrun --nproc_per_node=K -m pretrain.train CONFIG`` (K processes, any number of nodes).

Reads top to bottom: config, process group and mesh, data, model, optimizer, resume, loop. The step
itself is ``train_step``: ``accumulate_gradients`` (micro-batches forward/backward, or the pipeline
schedule over them), then ``optimizer_step`` (fp16 unscale, clip, optimizer and scheduler step).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import warnings

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.tensor import DTensor

from pretrain.components import checkpoint
from pretrain.config import OptimConfig, TrainConfig, load_train_config
from pretrain.components.dataloader import build_loaders, fingerprint
from pretrain.components.device import configure_attention, resolve_device, resolve_precision
from pretrain.inference.loading import save_run_dir
from pretrain.components.metrics import MetricsLogger, bubble_fraction, check_trackers
from pretrain.models.llama import Llama, flops_per_token, num_params
from pretrain.distributed.parallel_dims import ParallelDims, init_distributed, parallelize
from pretrain.distributed.pipeline_parallel import Pipeline, build_pipeline


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="training config YAML (see configs/train/)")
    parser.add_argument("--resume", default="none", metavar="auto|none|PATH",
                        help="auto: continue from the latest checkpoint in the run's checkpoint dir, if any; "
                             "PATH: from that checkpoint; none (default): start fresh")
    parser.add_argument("--out-dir", help="override out_dir of the config")
    parser.add_argument("--max-steps", type=int, help="override max_steps of the config")
    parser.add_argument("--stop-at-step", type=int, metavar="N",
                        help="checkpoint and exit at step N without changing the schedule's horizon "
                             "(for jobs shorter than the run; continue with --resume auto)")
    from dataprep.cli import add_set_argument

    add_set_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the run's outcome as JSON on stdout (rank 0)")


# --- setup ------------------------------------------------------------------------------------------


def total_steps(cfg: TrainConfig) -> int:
    """max_steps if set, else the token budget max_tokens divided by the tokens per step (rounded up)."""
    return cfg.max_steps or math.ceil(cfg.max_tokens / (cfg.global_batch_size * cfg.seq_len))


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


def _param_dtype(precision: str, dims: ParallelDims) -> torch.dtype | None:
    """bf16 weights gathered by FSDP's mixed-precision policy (elsewhere bf16 comes from autocast)."""
    return torch.bfloat16 if precision == "bf16" and dims.fsdp_enabled else None


def _check_devices(cfg: TrainConfig, dims: ParallelDims, device: torch.device) -> None:
    if cfg.model.tie_embeddings and dims.world_size > 1:
        raise ValueError("model.tie_embeddings is supported in single-process training only (FSDP/TP would shard the shared weight twice)")
    if cfg.parallel.offload and (device.type != "cuda" or not dims.fsdp_enabled):
        raise ValueError("parallel.offload moves FSDP's shards to host memory: it needs CUDA and more than one "
                         "data-parallel rank")


def build_parallel_model(cfg: TrainConfig, dims: ParallelDims, device: torch.device, precision: str) -> Llama:
    """Build on the meta device, parallelize, allocate this rank's shards and initialise them in place.
    The initial weights are the same for every parallel layout (``Llama.init_weights`` draws each
    element from its position in the full tensor), so runs are comparable, and no process ever holds
    the full model. (With pipeline parallelism: ``build_pipeline``, which builds each stage the same way.)"""
    _check_devices(cfg, dims, device)
    with torch.device("meta"):
        model = Llama(cfg.model)
    parallelize(model, dims, cfg.parallel, _param_dtype(precision, dims), cfg.seq_len)
    model.to_empty(device=device)
    model.tie_weights()
    model.init_weights(cfg.seed)
    return model


def build_optimizer(model: torch.nn.Module, opt: OptimConfig, device: torch.device) -> torch.optim.AdamW:
    """AdamW; weight decay on matrices (and embeddings), none on 1-D tensors (norm gains). Fused where the
    parameters live on the GPU (offloaded ones live in host memory)."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": opt.weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    fused = device.type == "cuda" and all(p.device.type == "cuda" for p in params)
    return torch.optim.AdamW(groups, lr=opt.lr, betas=opt.betas, eps=opt.eps, fused=fused)


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


# --- the step ------------------------------------------------------------------------------------------


class TrainStepContext:
    """What a forward pass needs besides the model, decided once: autocast, the attention kernel (fp16),
    loss parallelism, the fp16 gradient scaler, whether FSDP holds gradients unsharded between
    micro-batches, the pipeline group (grad norm over stages) and this rank's token positions under context
    parallelism."""

    def __init__(self, device: torch.device, precision: str, loss_parallel: bool, fsdp: bool,
                 no_sync_accumulation: bool = False, pp_group=None, positions: torch.Tensor | None = None):
        self.device = device
        self.no_sync = fsdp and no_sync_accumulation
        self.pp_group, self.positions = pp_group, positions
        configure_attention(precision, device)
        autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
        # with FSDP, bf16 comes from its MixedPrecisionPolicy instead of autocast
        use_autocast = autocast_dtype is not None and not (fsdp and precision == "bf16")
        self.autocast = (lambda: torch.autocast(device.type, dtype=autocast_dtype)) if use_autocast else contextlib.nullcontext
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

    def loss(self, model, batch: torch.Tensor) -> torch.Tensor:
        batch = batch.to(self.device, non_blocking=True)
        inputs, targets = batch[:, :-1], batch[:, 1:]
        if self.positions is not None:  # context parallel: this rank's chunks of each sequence
            inputs, targets = inputs[:, self.positions], targets[:, self.positions]
        with self.autocast():
            logits = model(inputs)
        with self.loss_ctx():
            return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def accumulate_gradients(model, micro_batches: list[torch.Tensor], ctx: TrainStepContext) -> torch.Tensor:
    """Forward and backward over this rank's micro-batches; returns the mean loss (no host sync). FSDP
    reduce-scatters each micro-batch's gradients as they come (only the shards accumulate), unless
    ``no_sync_accumulation`` defers that to the last micro-batch. A ``Pipeline`` runs its schedule
    over them (the loss is then zero on ranks without the last stage)."""
    if isinstance(model, Pipeline):
        return model.step(micro_batches, ctx)
    total = torch.zeros((), device=ctx.device)
    for i, batch in enumerate(micro_batches):
        if ctx.no_sync:
            model.set_requires_gradient_sync(i == len(micro_batches) - 1)
        loss = ctx.loss(model, batch) / len(micro_batches)
        with ctx.loss_ctx():
            (ctx.scaler.scale(loss) if ctx.scaler else loss).backward()
        total += (loss.full_tensor() if isinstance(loss, DTensor) else loss).detach()
    return total


def optimizer_step(optimizer, scheduler, ctx: TrainStepContext, grad_clip: float) -> torch.Tensor:
    """Unscale (fp16: every rank skips the step if any found an inf or nan), clip, step; returns the
    gradient norm."""
    if ctx.scaler:
        ctx.scaler.unscale_(optimizer)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    grad_norm = clip_grad_norm(params, grad_clip, ctx.pp_group)
    if ctx.scaler:
        ctx.scaler.step(optimizer)
        ctx.scaler.update()
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    scheduler.step()
    return grad_norm


def train_step(model, optimizer, scheduler, micro_batches: list[torch.Tensor], ctx: TrainStepContext,
               grad_clip: float) -> tuple[torch.Tensor, torch.Tensor]:
    """One optimizer step over this rank's micro-batches; returns (mean loss, grad norm) as tensors
    (no host sync)."""
    loss = accumulate_gradients(model, micro_batches, ctx)
    return loss, optimizer_step(optimizer, scheduler, ctx, grad_clip)


@torch.no_grad()
def validation_loss(model, loader, n_batches: int, ctx: TrainStepContext, dims: ParallelDims | None) -> float:
    """Mean loss over the first ``n_batches`` global batches of the validation order (the same every time),
    averaged over the ranks of ``dims`` (None: this process alone)."""
    total = torch.zeros((), device=ctx.device)
    for i in range(n_batches):
        micro_batches = loader.batch_at(i * loader.global_batch)
        if isinstance(model, Pipeline):
            total += model.step(micro_batches, ctx, forward_only=True)
            continue
        for batch in micro_batches:
            loss = ctx.loss(model, batch)
            total += (loss.full_tensor() if isinstance(loss, DTensor) else loss) / len(micro_batches)
    total /= n_batches
    if dims is None:
        return total.item()
    return dims.mean_loss(total, holds_loss=not isinstance(model, Pipeline) or model.has_last)


# --- the run ------------------------------------------------------------------------------------------


def run(cfg: TrainConfig, resume: str | None = None, stop_at: int | None = None) -> list[dict]:
    """Train per ``cfg`` (from a checkpoint when ``resume``), up to the horizon or to step ``stop_at``;
    returns the training records logged (rank 0; empty elsewhere)."""
    device = resolve_device(cfg.device)
    rank, _, world = init_distributed(device.type)
    dims = ParallelDims.from_config(cfg.parallel, world)
    dims.build_mesh(device.type)
    dp = dims.data_parallel()
    precision = resolve_precision(cfg.precision, device)
    torch.manual_seed(cfg.seed)
    if cfg.seq_len > cfg.model.max_seq_len:
        raise ValueError(f"seq_len {cfg.seq_len} exceeds the model's max_seq_len {cfg.model.max_seq_len}")

    train_loader, val_loader = build_loaders(cfg.data, cfg.seq_len, cfg.global_batch_size, cfg.micro_batch_size,
                                             dp.rank, dp.size, cfg.model.vocab_size)
    pipe = None
    if dims.pp_enabled:  # the stepper is the pipeline; the optimizer and checkpoints see its stages' module
        _check_devices(cfg, dims, device)
        pipe = build_pipeline(cfg, dims, device, _param_dtype(precision, dims), train_loader.grad_accum_steps)
        model = pipe.module
    else:
        model = build_parallel_model(cfg, dims, device, precision)
    stepper = pipe or model
    optimizer = build_optimizer(model, cfg.optim, device)
    steps = total_steps(cfg)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, steps, cfg.optim))
    ctx = TrainStepContext(device, precision, cfg.parallel.loss_parallel, fsdp=dims.fsdp_enabled,
                           no_sync_accumulation=cfg.parallel.no_sync_accumulation, pp_group=dims.group("pp"),
                           positions=getattr(model, "positions", None))

    ckpt_root = os.path.join(cfg.out_dir, cfg.checkpoint.dir)
    step = _resume(resume, ckpt_root, cfg, model, optimizer, scheduler, train_loader, ctx)
    if rank == 0:
        save_run_dir(cfg)  # config.yaml with absolute paths and the tokenizer: the folder can move
    tokens_per_step = cfg.global_batch_size * cfg.seq_len
    log = MetricsLogger(cfg.out_dir, cfg.log.jsonl, cfg.log.tensorboard, flops_per_token(cfg.model, cfg.seq_len),
                        world, device, rank, wandb=cfg.log.wandb, run_config=cfg.model_dump(mode="json"))
    pp_fields = {}
    if dims.pp_enabled:
        pp_fields = {"pp_bubble": bubble_fraction(cfg.parallel.pp_schedule, dims.pp, train_loader.grad_accum_steps,
                                                  cfg.parallel.pp_stages_per_rank)}
    if rank == 0:
        layout = " ".join(f"{k}={v}" for k, v in dims.degrees().items() if v > 1 or k in ("dp_shard", "tp"))
        print(f"[train] {num_params(cfg.model):,} parameters, {steps} steps of {tokens_per_step:,} tokens, "
              f"{layout}, {precision} on {device.type}, "
              f"grad accumulation {train_loader.grad_accum_steps}, starting at step {step}", file=sys.stderr)

    def save() -> str:
        state = {"scheduler": scheduler.state_dict(), "loader": train_loader.state_dict(),
                 "data": fingerprint(train_loader), "model_config": cfg.model.model_dump(mode="json"),
                 "scaler": ctx.scaler.state_dict() if ctx.scaler else None, "parallel": dims.degrees()}
        return checkpoint.save(ckpt_root, step, model, optimizer, state, cfg.checkpoint.keep_last)

    records = []
    log.start(step)
    end = min(steps, stop_at or steps)
    saved = None
    while step < end:
        loss, grad_norm = train_step(stepper, optimizer, scheduler, train_loader.next_step(), ctx, cfg.optim.grad_clip)
        step += 1
        log.count_tokens(tokens_per_step)
        if step % cfg.log.every_steps == 0 or step == steps:
            lr = cfg.optim.lr * lr_factor(step - 1, steps, cfg.optim)  # the lr this step used
            rec = log.log_train(step, loss=dims.mean_loss(loss, pipe is None or pipe.has_last), lr=lr,
                                grad_norm=grad_norm.item(), tokens=step * tokens_per_step, **pp_fields)
            records.append(rec)
        if val_loader is not None and (step % cfg.log.val_every_steps == 0 or step == steps):
            log.write({"kind": "val", "step": step,
                       "val_loss": validation_loss(stepper, val_loader, cfg.log.val_batches, ctx, dims)})
            log.start(step)
        if step % cfg.checkpoint.every_steps == 0 or step == end:
            saved = save()
            log.start(step)
    if step == steps:  # finished: the consolidated weights for inference
        path = os.path.join(cfg.out_dir, "model.safetensors")
        if pipe is None:
            checkpoint.export_model(model, path, {"step": step, "model_config": cfg.model.model_dump_json()})
        else:  # no rank holds every stage: rank 0 reads the final checkpoint whole
            if rank == 0:
                checkpoint.export_checkpoint(saved or checkpoint.list_checkpoints(ckpt_root)[-1], path)
            dist.barrier()
    log.close()
    return records if rank == 0 else []


def _resume(resume, ckpt_root, cfg, model, optimizer, scheduler, train_loader, ctx) -> int:
    """Restore from a checkpoint when asked; returns the step to continue from."""
    if resume in (None, "", "none"):
        if checkpoint.list_checkpoints(ckpt_root):
            raise ValueError(f"{ckpt_root} already holds checkpoints: pass --resume auto to continue that run, "
                             "or choose another out_dir")
        return 0
    path = checkpoint.resolve(resume, ckpt_root)
    if path is None:
        return 0  # --resume auto with nothing saved yet: a fresh start
    state = checkpoint.load(path, model, optimizer)
    if state.get("model_config") != cfg.model.model_dump(mode="json"):
        raise checkpoint.CheckpointError(f"checkpoint {path} was trained with another model config")
    scheduler.load_state_dict(state["scheduler"])
    train_loader.load_state_dict(state["loader"])
    if ctx.scaler and state.get("scaler"):
        ctx.scaler.load_state_dict(state["scaler"])
    if state.get("data") != fingerprint(train_loader):
        warnings.warn(f"the training data differ from those of checkpoint {path}: the sample order changes")
    return int(state["step"])


def main(args: argparse.Namespace) -> int:
    sets = list(getattr(args, "set", None) or [])
    sets += [f"{key}={value}" for key, value in (("out_dir", args.out_dir), ("max_steps", args.max_steps)) if value is not None]
    cfg = load_train_config(args.config, sets=sets)  # validated: --max-steps -5 is an error
    check_trackers(cfg.log)  # a missing tracker package fails here, not after set-up
    if args.stop_at_step is not None and args.stop_at_step <= 0:
        raise ValueError(f"--stop-at-step {args.stop_at_step}: must be a positive step number")
    quiet = contextlib.redirect_stdout(sys.stderr) if getattr(args, "json", False) else contextlib.nullcontext()
    try:
        with quiet:
            records = run(cfg, args.resume, args.stop_at_step)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    if getattr(args, "json", False) and int(os.environ.get("RANK", "0")) == 0:
        import json

        final = os.path.join(cfg.out_dir, "model.safetensors")
        print(json.dumps({"out_dir": os.path.abspath(cfg.out_dir), "steps": total_steps(cfg),
                          "last_step": records[-1]["step"] if records else None,
                          "loss": records[-1]["loss"] if records else None,
                          "model": os.path.abspath(final) if os.path.exists(final) else None,
                          "metrics": os.path.abspath(os.path.join(cfg.out_dir, cfg.log.jsonl)) if cfg.log.jsonl else None}))
    return 0


if __name__ == "__main__":
    _parser = argparse.ArgumentParser(prog="python -m pretrain.train", description=__doc__.splitlines()[0])
    add_arguments(_parser)
    sys.exit(main(_parser.parse_args()))
