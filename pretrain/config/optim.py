"""The training config's ``optim:`` section (AdamW and the learning-rate schedule) and ``planned:``, the
global batch and learning rate ``pretrain plan`` chose them for."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dataprep.core.validation import StrictModel


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
    # when the global batch differs from the plan's or the resumed run's: sqrt scales the peak lr by
    # sqrt(new / old) (AdamW's rule); warn keeps it and says so (pretrain/components/batch_change.py)
    batch_change: Literal["sqrt", "warn"] = "sqrt"


class PlannedConfig(StrictModel):
    """What ``pretrain plan --out`` chose: the global batch the config's learning rate is for, and the
    law's learning rate at it."""

    global_batch_size: int = Field(gt=0)
    law_lr: float = Field(gt=0)
    step_seconds: float | None = Field(None, ge=0)  # the plan's time per step: the training log compares
