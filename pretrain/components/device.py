"""Which device and precision a process computes in: what ``device: auto`` and ``precision: auto``
(and ``--device auto``) mean, decided in one place for training, evaluation and generation, and the
kernel settings a precision needs on CUDA (TF32 matmuls, fp16's attention kernel)."""

from __future__ import annotations

import os

import torch

from dataprep.core.errors import UsageError


def resolve_device(name: str) -> torch.device:
    """``auto``: CUDA when available, else CPU; ``cuda`` is this process's GPU on its node (torchrun's
    LOCAL_RANK, 0 for a single process)."""
    if name == "cuda" or (name == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise UsageError("device cuda requested but CUDA is not available")
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device("cpu")


def resolve_precision(name: str, device: torch.device) -> str:
    """``auto``: bf16 on CUDA, fp32 elsewhere; any other name is kept."""
    if name != "auto":
        return name
    return "bf16" if device.type == "cuda" else "fp32"


def configure_matmul(precision: str, device: torch.device) -> None:
    """tf32 on CUDA: fp32 matmuls on TF32 tensor cores (inputs rounded to 10 mantissa bits, fp32
    accumulation: an H100's 494.5 TFLOP/s against 67); every other precision keeps them exact (torch's
    default), so a process's setting follows its config."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"


def configure_attention(precision: str, device: torch.device) -> None:
    """fp16 on CUDA: keep SDPA off cuDNN's attention kernel, torch's first choice on Hopper, which trains
    fp16 measurably worse than flash attention (same loss scale, no skipped step; docs/gpu.md); torch
    then picks flash attention. bf16 and fp32 keep torch's choice."""
    if device.type == "cuda" and precision == "fp16":
        torch.backends.cuda.enable_cudnn_sdp(False)
