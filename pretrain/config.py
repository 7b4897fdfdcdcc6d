"""Model and training configs: one YAML file each, validated with clear errors.

``pretrain size``/``pretrain plan`` write them; ``pretrain train`` reads them. A training config names
its model config by path (relative to the training config's folder) or inlines it under ``model:``.
"""

from __future__ import annotations

import os
from typing import Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator

from dataprep.validation import ConfigError, StrictModel, apply_overrides, describe

__all__ = ["ConfigError", "ModelConfig", "TrainConfig", "load_model_config", "load_train_config", "save_yaml"]


class ModelConfig(StrictModel):
    """A Llama-style decoder: RMSNorm, RoPE, SwiGLU, grouped-query attention."""

    vocab_size: int = Field(gt=0)
    d_model: int = Field(gt=0)
    n_layers: int = Field(gt=0)
    n_heads: int = Field(gt=0)
    n_kv_heads: int = Field(gt=0)
    ffn_dim: int = Field(gt=0)
    max_seq_len: int = Field(2048, gt=0)
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    tie_embeddings: bool = False
    init_std: float = 0.02

    @model_validator(mode="after")
    def _check_heads(self) -> "ModelConfig":
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads {self.n_heads} is not divisible by n_kv_heads {self.n_kv_heads}")
        if (self.d_model // self.n_heads) % 2:
            raise ValueError("head dimension must be even for rotary embeddings")
        return self

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


class DataSource(StrictModel):
    path: str  # a token-shard directory with manifest.json
    weight: float = Field(1.0, gt=0)  # share of training tokens drawn from this source


class DataConfig(StrictModel):
    sources: list[DataSource]
    val_fraction: float = Field(0.01, ge=0, lt=1)  # documents held out for validation
    seed: int = 1234


class ParallelConfig(StrictModel):
    dp_shard: int = Field(-1, description="FSDP degree; -1 = world_size / tp")
    tp: int = Field(1, gt=0)
    activation_checkpointing: Literal["none", "block", "selective"] = "none"
    compile: bool = False
    loss_parallel: bool = False


class OptimConfig(StrictModel):
    lr: float = Field(3e-4, gt=0)
    min_lr_ratio: float = Field(0.1, ge=0, le=1)
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    weight_decay: float = Field(0.1, ge=0)
    grad_clip: float = Field(1.0, ge=0)
    schedule: Literal["cosine", "wsd", "constant"] = "cosine"
    warmup_steps: int = Field(100, ge=0)
    decay_fraction: float = Field(0.2, gt=0, le=1)  # WSD: final share of steps spent decaying


class CheckpointConfig(StrictModel):
    dir: str = "checkpoints"
    every_steps: int = Field(500, gt=0)
    keep_last: int = Field(3, gt=0)


class WandbConfig(StrictModel):
    """A Weights & Biases run (``pip install 'ccpretrain[wandb]'``); offline mode writes under out_dir/wandb."""

    project: str
    name: str | None = None  # default: the out_dir's folder name
    entity: str | None = None
    mode: Literal["online", "offline", "disabled"] = "online"
    tags: list[str] = Field(default_factory=list)


class LogConfig(StrictModel):
    every_steps: int = Field(10, gt=0)
    jsonl: str | None = "metrics.jsonl"
    tensorboard: str | None = None  # folder inside out_dir for TensorBoard event files (ccpretrain[tensorboard])
    wandb: WandbConfig | None = None  # Weights & Biases run (ccpretrain[wandb])
    val_every_steps: int = Field(200, gt=0)
    val_batches: int = Field(10, gt=0)


class TrainConfig(StrictModel):
    model: ModelConfig | str  # inline, or a path to a model config YAML
    data: DataConfig
    seq_len: int = Field(1024, gt=0)
    micro_batch_size: int = Field(8, gt=0)  # sequences per rank per forward
    global_batch_size: int = Field(64, gt=0)  # sequences per optimizer step, all ranks
    max_steps: int | None = Field(None, gt=0)
    max_tokens: int | None = Field(None, gt=0)  # alternative horizon: the budget's D
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"  # auto: bf16 on CUDA, fp32 on CPU
    device: Literal["auto", "cpu", "cuda"] = "auto"
    seed: int = 0
    parallel: ParallelConfig = Field(default_factory=ParallelConfig)
    optim: OptimConfig = Field(default_factory=OptimConfig)
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    log: LogConfig = Field(default_factory=LogConfig)
    out_dir: str = "runs/default"

    @model_validator(mode="after")
    def _check_horizon(self) -> "TrainConfig":
        if self.max_steps is None and self.max_tokens is None:
            raise ValueError("set max_steps or max_tokens")
        return self



def _load_yaml(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh) or {}
    except FileNotFoundError:
        raise ConfigError(f"config file {path!r} does not exist") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping")
    return data


def load_model_config(path_or_dict: str | dict) -> ModelConfig:
    data = _load_yaml(path_or_dict) if isinstance(path_or_dict, str) else path_or_dict
    try:
        return ModelConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"model config: {describe(exc, ModelConfig)}") from None


def load_train_config(path_or_dict: str | dict, base_dir: str | None = None, sets: list[str] | None = None) -> TrainConfig:
    """Load and validate a training config; a ``model:`` path is resolved relative to the file.
    ``sets`` are dotted command-line assignments (``optim.lr=3e-4``, ``model.n_layers=4``), applied
    after the model file is read and validated with everything else."""
    if isinstance(path_or_dict, str):
        base_dir = os.path.dirname(os.path.abspath(path_or_dict))
        data = _load_yaml(path_or_dict)
    else:
        data = dict(path_or_dict)
    if isinstance(data.get("model"), str):
        model_path = data["model"]
        if not os.path.isabs(model_path) and base_dir and not os.path.exists(model_path):
            model_path = os.path.join(base_dir, model_path)
        data["model"] = _load_yaml(model_path)
    data = apply_overrides(data, sets or [])
    try:
        return TrainConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"train config: {describe(exc, TrainConfig)}") from None


def save_yaml(model: BaseModel, path: str) -> None:
    from dataprep.io import atomic_write_text

    atomic_write_text(path, yaml.safe_dump(model.model_dump(mode="json"), sort_keys=False))
