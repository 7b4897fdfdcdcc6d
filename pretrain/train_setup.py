"""Setting up a run: the horizon, the data loaders, and the model built on its mesh (or this rank's pipeline
stages), initialised the same for every parallel layout."""

from __future__ import annotations

import math
import os
import sys

import torch

from dataprep.core.errors import UsageError
from pretrain.components.dataloader import Loader, build_loaders
from pretrain.config.model import ModelConfig
from pretrain.config.train import TrainConfig
from pretrain.distributed.parallel_dims import DataParallel, ParallelDims
from pretrain.distributed.parallelize import parallelize
from pretrain.distributed.pipeline_parallel import PipelineParallelModel, build_pipeline
from pretrain.layout_rules import check_layout
from pretrain.models.llama import Llama, num_params


def total_steps(cfg: TrainConfig) -> int:
    """max_steps if set, else the token budget max_tokens divided by the tokens per step (rounded up)."""
    return cfg.max_steps or math.ceil(cfg.max_tokens / (cfg.global_batch_size * cfg.seq_len))


def _param_dtype(precision: str, dims: ParallelDims) -> torch.dtype | None:
    """bf16 weights gathered by FSDP's mixed-precision policy (elsewhere bf16 comes from autocast)."""
    return torch.bfloat16 if precision == "bf16" and dims.fsdp_enabled else None


def _check_devices(cfg: TrainConfig, dims: ParallelDims, device: torch.device) -> None:
    """The layout's rules again, now that the world size and the device are known."""
    check_layout(cfg.parallel, cfg.model, world_size=dims.world_size, device_type=device.type)


def warn_unused_vocab(model: ModelConfig, data_vocab: int) -> None:
    """A model vocabulary far beyond the tokenizer's trains embedding rows no id reaches: say so."""
    unused = (model.vocab_size - data_vocab) * model.d_model * (1 if model.tie_embeddings else 2)
    if unused > 0.1 * num_params(model):
        print(
            f"[train] warning: model.vocab_size {model.vocab_size} exceeds the data's tokenizer vocabulary "
            f"{data_vocab}: {unused:,} of the model's {num_params(model):,} parameters are embedding rows no "
            f"token id reaches; set model.vocab_size: auto (or {data_vocab})",
            file=sys.stderr,
        )


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


def build_train_loaders(cfg: TrainConfig, rank: int, dp: DataParallel) -> tuple[Loader, Loader | None]:
    """The training and validation loaders of this data-parallel rank; shards at a URL cached per process."""
    if cfg.seq_len > cfg.model.max_seq_len:
        raise UsageError(f"seq_len {cfg.seq_len} exceeds the model's max_seq_len {cfg.model.max_seq_len}")
    cache_dir = os.path.join(cfg.data.cache.dir or os.path.join(cfg.out_dir, "data_cache"), f"rank-{rank}")
    return build_loaders(
        cfg.data,
        cfg.seq_len,
        cfg.global_batch_size,
        cfg.micro_batch_size,
        dp.rank,
        dp.size,
        cfg.model.vocab_size,
        cache_dir,
        total_steps(cfg),
    )


def build_model(
    cfg: TrainConfig, dims: ParallelDims, device: torch.device, precision: str, grad_accum_steps: int
) -> tuple[PipelineParallelModel | None, torch.nn.Module]:
    """The model, or with pipeline parallelism this rank's stages (the optimizer and checkpoints see
    their module, the step runs the pipeline)."""
    if not dims.pp_enabled:
        return None, build_parallel_model(cfg, dims, device, precision)
    _check_devices(cfg, dims, device)
    pipe = build_pipeline(cfg, dims, device, _param_dtype(precision, dims), grad_accum_steps)
    return pipe, pipe.module
