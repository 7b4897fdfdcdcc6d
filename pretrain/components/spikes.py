"""Loss spikes: a step's loss far above the recent ones, noticed the step it happens.

The statistic: a step is a spike when its loss exceeds ``median + threshold * 1.4826 * MAD`` of the
previous ``window`` steps' losses (MAD: the median absolute deviation from the median; 1.4826 x MAD is
a standard deviation for Gaussian noise). Median and MAD ignore a few outliers, so a spike does not
raise the bar for the next one as a mean and variance (or an EMA of them) would, and a falling loss keeps
the median above the current level, which errs towards no alarm. A scale floor of a tenth of a percent of
the median keeps a window of near-identical losses from flagging noise.

Every rank judges the same numbers: each rank's loss goes into one world-sized vector summed by an
all-reduce, every rank takes the same mean from it, so all ranks reach the same verdict (and roll back
together); the vector also says which rank saw the largest loss. The window is checkpointed with the run
(``state_dict``), so a resumed or rolled-back run judges against the losses that led to its step.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

MAD_TO_STD = 1.4826
SCALE_FLOOR = 1e-3  # relative to the median


class SpikeError(RuntimeError):
    """Spikes kept coming after ``max_rollbacks`` rollbacks: the run stops rather than loop."""


def rank_losses(loss: torch.Tensor, holds_loss: bool = True) -> torch.Tensor:
    """Every rank's loss, as a vector indexed by global rank (a collective over the world); zero for a rank
    that holds no loss (a pipeline stage before the last)."""
    world = dist.get_world_size() if dist.is_initialized() else 1
    rank = dist.get_rank() if dist.is_initialized() else 0
    losses = torch.zeros(world, device=loss.device)
    if holds_loss:
        losses[rank] = loss.detach().float()
    if world > 1:
        dist.all_reduce(losses)
    return losses.cpu()


@dataclass(frozen=True)
class Spike:
    step: int
    loss: float
    median: float
    limit: float  # the loss above which this step counted as a spike
    rank: int  # the rank with the largest loss at that step

    def record(self, policy: str, before: str | None) -> dict:
        """The metrics record: ``checkpoint_before`` is the checkpoint kept for it (None: none yet)."""
        return {"kind": "spike", "step": self.step, "rank": self.rank, "cause": "loss", "loss": self.loss,
                "median": self.median, "limit": self.limit, "policy": policy, "checkpoint_before": before}


class SpikeDetector:
    """The losses of the last ``window`` steps and the verdict on the next one (a torch ``Stateful``)."""

    def __init__(self, window: int, threshold: float):
        self.threshold = threshold
        self.history: deque[tuple[int, float]] = deque(maxlen=window)

    def observe(self, step: int, loss: float, rank: int = 0) -> Spike | None:
        """Judge ``step``'s loss against the window, then add it; a non-finite loss is the guard's and is
        left out. No verdict until the window is full."""
        if not math.isfinite(loss):
            return None
        spike = None
        if len(self.history) == self.history.maxlen:
            losses = np.array([value for _, value in self.history])
            median = float(np.median(losses))
            scale = max(MAD_TO_STD * float(np.median(np.abs(losses - median))), SCALE_FLOOR * abs(median))
            limit = median + self.threshold * scale
            if loss > limit:
                spike = Spike(step, loss, median, limit, rank)
        self.history.append((step, loss))
        return spike

    def state_dict(self) -> dict:
        return {"losses": [list(item) for item in self.history]}

    def load_state_dict(self, state: dict) -> None:
        self.history.clear()
        self.history.extend((int(step), float(loss)) for step, loss in state["losses"])
