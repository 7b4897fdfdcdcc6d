"""The training loop: ``pretrain train CONFIG`` (one process) or
``torchrun --nproc_per_node=K -m pretrain.train CONFIG`` (K processes, any number of nodes).

Reads top to bottom: config, process group and mesh, data, model, optimizer, resume, loop. The step
itself is ``train_step``: micro-batches forward/backward (gradient accumulation), clip, optimizer and
scheduler step.
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

from pretrain import checkpoint
from pretrain.config import OptimConfig, TrainConfig, load_train_config
from pretrain.data import build_loaders, fingerprint
from pretrain.device import resolve_device, resolve_precision
from pretrain.inference import save_run_dir
from pretrain.metrics import MetricsLogger, check_trackers
from pretrain.model import Llama, flops_per_token
from pretrain.parallel import ParallelDims, init_distributed, parallelize


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


def build_parallel_model(cfg: TrainConfig, dims: ParallelDims, device: torch.device, precision: str) -> Llama:
    """Build on the meta device, parallelize, allocate, then load weights initialised on rank 0's CPU:
    the initial weights are the same for every parallel layout (so runs are comparable) and only
    rank 0 ever holds the full model."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    if cfg.model.tie_embeddings and dims.world_size > 1:
        raise ValueError("model.tie_embeddings is supported in single-process training only (FSDP/TP would shard the shared weight twice)")
    with torch.device("meta"):
        model = Llama(cfg.model)
    param_dtype = torch.bfloat16 if precision == "bf16" and device.type == "cuda" else None
    parallelize(model, dims, cfg.parallel, param_dtype)
    model.to_empty(device=device)
    model.tie_weights()
    full = {}
    if not dist.is_initialized() or dist.get_rank() == 0:
        with torch.device("meta"):  # skip nn's default init: init_weights sets every tensor
            init = Llama(cfg.model)
        init.to_empty(device="cpu")
        init.tie_weights()
        init.init_weights(cfg.seed)
        full = init.state_dict()
    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=dist.is_initialized())
    set_model_state_dict(model, full, options=options)
    model.reset_buffers()
    return model


def build_optimizer(model: torch.nn.Module, opt: OptimConfig, device: torch.device) -> torch.optim.AdamW:
    """AdamW; weight decay on matrices (and embeddings), none on 1-D tensors (norm gains)."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.ndim >= 2], "weight_decay": opt.weight_decay},
        {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=opt.lr, betas=opt.betas, eps=opt.eps, fused=device.type == "cuda")


def clip_grad_norm(params: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Global gradient norm over all ranks (DTensor-aware), and clipping to ``max_norm`` when > 0."""
    grads = [p.grad for p in params if p.grad is not None]
    norm = torch.nn.utils.get_total_norm(grads, foreach=True)
    if isinstance(norm, DTensor):
        norm = norm.full_tensor()
    if max_norm > 0:
        torch.nn.utils.clip_grads_with_norm_(params, max_norm, norm, foreach=True)
    return norm


# --- the step ------------------------------------------------------------------------------------------


class TrainStepContext:
    """What a forward pass needs besides the model, decided once: autocast, loss parallelism, the fp16
    gradient scaler and whether FSDP must be told when to reduce gradients."""

    def __init__(self, device: torch.device, precision: str, loss_parallel: bool, fsdp: bool):
        self.device, self.fsdp = device, fsdp
        autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
        # with FSDP on GPU, bf16 comes from its MixedPrecisionPolicy instead of autocast
        use_autocast = autocast_dtype is not None and not (fsdp and precision == "bf16" and device.type == "cuda")
        self.autocast = (lambda: torch.autocast(device.type, dtype=autocast_dtype)) if use_autocast else contextlib.nullcontext
        if loss_parallel:
            from torch.distributed.tensor.parallel import loss_parallel as lp

            self.loss_ctx = lp
        else:
            self.loss_ctx = contextlib.nullcontext
        self.scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None

    def loss(self, model, batch: torch.Tensor) -> torch.Tensor:
        batch = batch.to(self.device, non_blocking=True)
        inputs, targets = batch[:, :-1], batch[:, 1:]
        with self.autocast():
            logits = model(inputs)
        with self.loss_ctx():
            return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def train_step(model, optimizer, scheduler, micro_batches: list[torch.Tensor], ctx: TrainStepContext,
               grad_clip: float) -> tuple[torch.Tensor, torch.Tensor]:
    """One optimizer step over this rank's micro-batches; returns (mean loss, grad norm) as tensors
    (no host sync)."""
    total = torch.zeros((), device=ctx.device)
    for i, batch in enumerate(micro_batches):
        if ctx.fsdp:  # reduce-scatter gradients only after the last micro-batch
            model.set_requires_gradient_sync(i == len(micro_batches) - 1)
        loss = ctx.loss(model, batch) / len(micro_batches)
        with ctx.loss_ctx():
            (ctx.scaler.scale(loss) if ctx.scaler else loss).backward()
        total += (loss.full_tensor() if isinstance(loss, DTensor) else loss).detach()
    if ctx.scaler:
        ctx.scaler.unscale_(optimizer)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    grad_norm = clip_grad_norm(params, grad_clip)
    if ctx.scaler:
        ctx.scaler.step(optimizer)
        ctx.scaler.update()
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    scheduler.step()
    return total, grad_norm


@torch.no_grad()
def validation_loss(model, loader, n_batches: int, ctx: TrainStepContext, dp_group) -> float:
    """Mean loss over the first ``n_batches`` global batches of the validation order (the same every time)."""
    total, count = torch.zeros((), device=ctx.device), 0
    for i in range(n_batches):
        for batch in loader.batch_at(i * loader.global_batch):
            loss = ctx.loss(model, batch)
            total += loss.full_tensor() if isinstance(loss, DTensor) else loss
            count += 1
    return _dp_mean(total / count, dp_group)


def _dp_mean(value: torch.Tensor, dp_group) -> float:
    if dp_group is not None:
        value = value.clone()
        dist.all_reduce(value, group=dp_group)  # gloo has no AVG
        value /= dist.get_world_size(dp_group)
    return value.item()


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
    model = build_parallel_model(cfg, dims, device, precision)
    optimizer = build_optimizer(model, cfg.optim, device)
    steps = total_steps(cfg)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, steps, cfg.optim))
    ctx = TrainStepContext(device, precision, cfg.parallel.loss_parallel, fsdp=dims.fsdp_enabled)

    ckpt_root = os.path.join(cfg.out_dir, cfg.checkpoint.dir)
    step = _resume(resume, ckpt_root, cfg, model, optimizer, scheduler, train_loader, ctx)
    if rank == 0:
        save_run_dir(cfg)  # config.yaml with absolute paths and the tokenizer: the folder can move
    tokens_per_step = cfg.global_batch_size * cfg.seq_len
    log = MetricsLogger(cfg.out_dir, cfg.log.jsonl, cfg.log.tensorboard, flops_per_token(cfg.model, cfg.seq_len),
                        world, device, rank, wandb=cfg.log.wandb, run_config=cfg.model_dump(mode="json"))
    if rank == 0:
        print(f"[train] {model.num_params():,} parameters, {steps} steps of {tokens_per_step:,} tokens, "
              f"dp_shard={dims.dp_shard} tp={dims.tp}, {precision} on {device.type}, "
              f"grad accumulation {train_loader.grad_accum_steps}, starting at step {step}", file=sys.stderr)

    def save() -> None:
        state = {"scheduler": scheduler.state_dict(), "loader": train_loader.state_dict(),
                 "data": fingerprint(train_loader), "model_config": cfg.model.model_dump(mode="json"),
                 "scaler": ctx.scaler.state_dict() if ctx.scaler else None,
                 "parallel": {"dp_shard": dims.dp_shard, "tp": dims.tp}}
        checkpoint.save(ckpt_root, step, model, optimizer, state, cfg.checkpoint.keep_last)

    records = []
    log.start(step)
    end = min(steps, stop_at or steps)
    while step < end:
        loss, grad_norm = train_step(model, optimizer, scheduler, train_loader.next_step(), ctx, cfg.optim.grad_clip)
        step += 1
        log.count_tokens(tokens_per_step)
        if step % cfg.log.every_steps == 0 or step == steps:
            lr = cfg.optim.lr * lr_factor(step - 1, steps, cfg.optim)  # the lr this step used
            rec = log.log_train(step, loss=_dp_mean(loss, dp.group), lr=lr, grad_norm=grad_norm.item(),
                                tokens=step * tokens_per_step)
            records.append(rec)
        if val_loader is not None and (step % cfg.log.val_every_steps == 0 or step == steps):
            log.write({"kind": "val", "step": step,
                       "val_loss": validation_loss(model, val_loader, cfg.log.val_batches, ctx, dp.group)})
            log.start(step)
        if step % cfg.checkpoint.every_steps == 0 or step == end:
            save()
            log.start(step)
    if step == steps:  # finished: the consolidated weights for inference
        checkpoint.export_model(model, os.path.join(cfg.out_dir, "model.safetensors"),
                                {"step": step, "model_config": cfg.model.model_dump_json()})
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
