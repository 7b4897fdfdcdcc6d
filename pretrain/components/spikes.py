"""Loss spikes: a step's loss far above the recent ones, noticed the step it happens.

The statistic: a step is a spike when its loss exceeds ``median + threshold * 1.4826 * MAD`` of the
previous ``window`` steps' losses (MAD: the median absolute deviation from the median; 1.4826 x MAD is
a standard deviation for Gaussian noise). Median and MAD ignore a few outliers, so a spike does not
raise the bar for the next one as a mean and variance (or an EMA of them) would, and a falling loss keeps
the median above the current level, which errs towards no alarm. A scale floor of a tenth of a percent of
the median keeps a window of near-identical losses from flagging noise.

Every rank judges the same numbers: each rank's loss goes into the guard's world-sized table summed by
one all-reduce (pretrain/components/guard.py), every rank takes the same mean from it, so all ranks reach
the same verdict (and roll back together); the table also says which rank saw the largest loss. The window
and the verdict stay on the device (``judge``): the host reads them on steps that log, validate or
checkpoint. The window is checkpointed with the run (``state_dict``), so a resumed or rolled-back run
judges against the losses that led to its step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from dataprep.core.errors import CcpretrainError

MAD_TO_STD = 1.4826
SCALE_FLOOR = 1e-3  # relative to the median


class SpikeError(CcpretrainError, RuntimeError):
    """Spikes kept coming after ``max_rollbacks`` rollbacks: the run stops rather than loop."""

    exit_status = 3  # the run stopped on purpose (README's exit statuses)


@dataclass(frozen=True)
class Spike:
    step: int
    loss: float
    median: float
    limit: float  # the loss above which this step counted as a spike
    rank: int  # the rank with the largest loss at that step

    def record(self, policy: str, before: str | None) -> dict:
        """The metrics record: ``checkpoint_before`` is the checkpoint kept for it (None: none yet)."""
        return {
            "kind": "spike",
            "step": self.step,
            "rank": self.rank,
            "cause": "loss",
            "loss": self.loss,
            "median": self.median,
            "limit": self.limit,
            "policy": policy,
            "checkpoint_before": before,
        }


class Verdict(NamedTuple):
    """One step's judgement, on the device: ``spike`` (0-d bool), the window's ``median`` and the ``limit``."""

    spike: torch.Tensor
    median: torch.Tensor
    limit: torch.Tensor


class SpikeDetector:
    """The losses of the last ``window`` steps, kept on ``device`` as a ring, and the verdict on the next
    one (a torch ``Stateful``)."""

    def __init__(self, window: int, threshold: float, device: torch.device | str = "cpu"):
        self.window, self.threshold = window, threshold
        self.losses = torch.zeros(window, dtype=torch.float64, device=device)
        self.steps = torch.zeros(window, dtype=torch.int64, device=device)
        self.count = torch.zeros((), dtype=torch.int64, device=device)  # finite losses seen

    def judge(self, step: int, loss: torch.Tensor) -> Verdict:
        """Judge ``step``'s loss (a 0-d tensor) against the window, then add it; a non-finite loss is the
        guard's and is left out. No spike until the window is full. Nothing is read back."""
        loss = loss.detach().to(self.losses)
        finite = torch.isfinite(loss)
        median = torch.quantile(self.losses, 0.5)
        mad = torch.quantile((self.losses - median).abs(), 0.5)
        limit = median + self.threshold * torch.maximum(MAD_TO_STD * mad, SCALE_FLOOR * median.abs())
        spike = (self.count >= self.window) & finite & (loss > limit)
        slot = (torch.arange(self.window, device=self.losses.device) == self.count % self.window) & finite
        self.losses = torch.where(slot, loss, self.losses)
        self.steps = torch.where(slot, step, self.steps)
        self.count += finite.long()
        return Verdict(spike, median, limit)

    def observe(self, step: int, loss: float, rank: int = 0) -> Spike | None:
        """``judge`` read back at once: the spike, if ``step``'s loss is one."""
        verdict = self.judge(step, torch.tensor(loss))
        if not verdict.spike.item():
            return None
        return Spike(step, loss, verdict.median.item(), verdict.limit.item(), rank)

    @property
    def history(self) -> list[tuple[int, float]]:
        """The window's (step, loss) pairs, oldest first (a read back)."""
        n = min(int(self.count), self.window)
        pairs = sorted(zip(self.steps.tolist(), self.losses.tolist()))
        return pairs[len(pairs) - n :]

    def state_dict(self) -> dict:
        return {"losses": [list(item) for item in self.history]}

    def load_state_dict(self, state: dict) -> None:
        pairs = [(int(step), float(loss)) for step, loss in state["losses"]][-self.window :]
        device = self.losses.device
        self.losses = torch.zeros(self.window, dtype=torch.float64, device=device)
        self.steps = torch.zeros(self.window, dtype=torch.int64, device=device)
        if pairs:
            self.steps[: len(pairs)] = torch.tensor([s for s, _ in pairs])
            self.losses[: len(pairs)] = torch.tensor([v for _, v in pairs], dtype=torch.float64)
        self.count = torch.tensor(len(pairs), device=device)
