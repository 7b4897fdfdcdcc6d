"""Each step's verdict (the non-finite guard's and the spike detector's) decided on the device and read
back later: ``judge`` runs between backward and update on every rank and returns the flag that holds the
update back, without a host sync; ``read`` copies the verdicts kept since the last read to the host in
one transfer, on a step that reads back anyway (logging, validation, checkpoint, straggler sample).
"""

from __future__ import annotations

import torch

from pretrain.components.guard import LOSS, NonFinite, any_non_finite, step_table
from pretrain.components.spikes import Spike, SpikeDetector

HOLDING_POLICIES = ("skip", "rollback")  # spike policies that hold the update back


class StepVerdicts:
    """The verdicts of the steps since the last ``read``: with ``guard``, a non-finite loss or gradient norm
    on any rank; under spike ``policy`` (not "off"), the mean loss over ``loss_ranks`` ranks judged by
    ``spikes``."""

    def __init__(self, guard: bool, policy: str, spikes: SpikeDetector, loss_ranks: int):
        self.guard, self.policy, self.spikes, self.loss_ranks = guard, policy, spikes, loss_ranks
        self.pending: list[tuple[int, torch.Tensor]] = []  # (step, its verdict as one row on the device)

    @property
    def enabled(self) -> bool:
        return self.guard or self.policy != "off"

    def judge(
        self, step: int, loss: torch.Tensor, grad_norm: torch.Tensor | None, holds_loss: bool = True
    ) -> torch.Tensor | None:
        """Judge ``step`` (one all-reduce, the same verdict on every rank) and keep the verdict; returns the
        flag that holds the update back (None: nothing can). ``grad_norm`` None: not checked (fp16)."""
        if not self.enabled:
            return None
        table = step_table(loss, grad_norm, holds_loss)
        mean = table[:, LOSS].sum() / self.loss_ranks
        nothing = torch.zeros((), device=table.device)
        spike = median = limit = nothing
        if self.policy != "off":
            spike, median, limit = self.spikes.judge(step, mean)
        figures = torch.stack([spike.double(), mean.double(), median.double(), limit.double()])
        self.pending.append((step, torch.cat([table.flatten().double(), figures])))
        held = any_non_finite(table) if self.guard else nothing
        if self.policy in HOLDING_POLICIES:
            held = torch.maximum(held, spike.float())
        return held if self.guard or self.policy in HOLDING_POLICIES else None

    def read(self) -> list[tuple[int, NonFinite | None, Spike | None]]:
        """The kept verdicts, oldest first, as (step, what was not finite, the spike), and forget them."""
        if not self.pending:
            return []
        steps = [step for step, _ in self.pending]
        rows = torch.stack([row for _, row in self.pending]).cpu()  # the one read back
        self.pending = []
        world = (rows.shape[1] - 4) // 3
        verdicts = []
        for step, row in zip(steps, rows):
            table = row[: world * 3].view(world, 3)
            spike, mean, median, limit = row[world * 3 :].tolist()
            found = NonFinite.from_table(table) if self.guard else None
            verdicts.append(
                (step, found, Spike(step, mean, median, limit, int(table[:, LOSS].argmax())) if spike else None)
            )
        return verdicts
