"""The training objective, defined once for the loop and the pipeline schedules."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy over every position, computed in fp32 whatever the logits' dtype."""
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def z_loss(logits: torch.Tensor) -> torch.Tensor:
    """PaLM's auxiliary loss: the mean squared log-partition, in fp32; pulls logsumexp(logits) toward 0 so the
    softmax stays well conditioned."""
    return logits.float().logsumexp(dim=-1).pow(2).mean()
