"""Warm start (``init_from`` in the training config): a new run begins from trained weights, with a fresh
optimizer and learning-rate schedule at step 0.

The source is one of ours (a ``step-*`` checkpoint, a run folder, a ``model.safetensors``) or a Hugging
Face Llama folder in the layout ``pretrain export --to hf`` writes. Each process reads the whole model
once, on the host, and keeps its own shards. Resuming a checkpoint (``--resume``) wins over ``init_from``:
the checkpoint already holds what the warm start began with.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

from dataprep.core.errors import MissingPath, UsageError
from pretrain.config.model import ModelConfig
from pretrain.models.hf_adapter import is_hf_folder, read_hf_folder

WRAPPER_PREFIXES = ("_orig_mod.", "_checkpoint_wrapped_module.")  # compile and activation checkpointing


def read_init_weights(path: str) -> tuple[ModelConfig, dict[str, torch.Tensor]]:
    """The model config and full weights (our names) of an ``init_from`` source."""
    if not os.path.exists(path):
        raise MissingPath(f"init_from {path!r} does not exist")
    if is_hf_folder(path):
        return read_hf_folder(path)
    from pretrain.inference.loading import load_trained

    trained = load_trained(path)
    return trained.model, trained.weights


def _plain_name(name: str) -> str:
    for prefix in WRAPPER_PREFIXES:
        name = name.replace(prefix, "")
    return name


def _check_model(path: str, found: ModelConfig, expected: ModelConfig) -> None:
    if found != expected:
        differ = {k: (v, getattr(expected, k)) for k, v in found if v != getattr(expected, k)}
        raise UsageError(
            f"init_from {path}: its model differs from this run's model in "
            + ", ".join(f"{k} ({a} there, {b} here)" for k, (a, b) in differ.items())
        )


def warm_start(model: torch.nn.Module, path: str, expected: ModelConfig) -> None:
    """Replace the freshly initialised weights of ``model`` (this rank's shards, or its pipeline stages)
    with those of ``path``, whose model config must equal ``expected``."""
    cfg, weights = read_init_weights(path)
    _check_model(path, cfg, expected)
    names = list(model.state_dict())
    missing = [n for n in names if _plain_name(n) not in weights]
    if missing:
        raise UsageError(f"init_from {path}: the weights lack {', '.join(map(_plain_name, missing[:3]))}")
    if not dist.is_initialized():
        model.load_state_dict({n: weights[_plain_name(n)] for n in names})
        return
    # every rank holds the full tensors: each keeps its shards (another pipeline stage's layers are left out)
    set_model_state_dict(model, weights, options=StateDictOptions(full_state_dict=True, strict=False))
