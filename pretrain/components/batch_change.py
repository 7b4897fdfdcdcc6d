"""A global batch other than the one the learning rate was chosen for: the plan's (``planned:`` in the
config, written by ``pretrain plan --out``) or, on resume, the checkpoint's. The stated rule
(``optim.batch_change``): ``sqrt`` scales the peak learning rate by sqrt(new batch / old batch), the
square-root rule for Adam-type optimizers (the gradient noise falls as 1/sqrt(batch); Malladi et al.
2022, "On the SDEs and Scaling Rules for Adaptive Gradient Algorithms"); ``warn`` keeps the rate and
says so. Either way the run writes a ``kind: batch_change`` record.
"""

from __future__ import annotations

import math

from pretrain.config.train import TrainConfig


class BatchRecord:
    """The global batch and peak learning rate a run trains with (a torch ``Stateful`` in its checkpoints),
    and, once a checkpoint is loaded, the ones it was saved with (``resumed``)."""

    def __init__(self, global_batch_size: int, peak_lr: float):
        self.global_batch_size, self.peak_lr = global_batch_size, peak_lr
        self.resumed: dict | None = None

    def state_dict(self) -> dict:
        return {"global_batch_size": self.global_batch_size, "peak_lr": self.peak_lr}

    def load_state_dict(self, state: dict) -> None:
        self.resumed = {"global_batch_size": int(state["global_batch_size"]), "peak_lr": float(state["peak_lr"])}


def batch_change(cfg: TrainConfig, resumed: dict | None, step: int) -> dict | None:
    """The record of a batch change and the peak learning rate the rule gives; None when the batch is the
    one the rate was chosen for (the resumed run's, else the plan's, else there is nothing to compare)."""
    batch = cfg.global_batch_size
    if resumed is not None:
        if resumed["global_batch_size"] == batch:
            return None
        before, lr, source = resumed["global_batch_size"], resumed["peak_lr"], "checkpoint"
    elif cfg.planned is not None and cfg.planned.global_batch_size != batch:
        before, lr, source = cfg.planned.global_batch_size, cfg.optim.lr, "plan"
    else:
        return None
    rule = cfg.optim.batch_change
    new_lr = lr * math.sqrt(batch / before) if rule == "sqrt" else lr
    return {
        "kind": "batch_change",
        "step": step,
        "against": source,
        "global_batch_size": batch,
        "previous_global_batch_size": before,
        "previous_lr": lr,
        "lr": new_lr,
        "rule": rule,
    }


def describe(record: dict) -> str:
    """One line for the log: what changed and what the rule did."""
    what = (
        f"global batch {record['global_batch_size']} differs from the {record['against']}'s "
        f"{record['previous_global_batch_size']}"
    )
    if record["rule"] == "sqrt":
        return (
            f"{what}: peak learning rate {record['previous_lr']:.3g} -> {record['lr']:.3g} (x sqrt of the "
            "batch ratio; optim.batch_change: warn keeps it)"
        )
    return f"{what}: peak learning rate kept at {record['lr']:.3g} (optim.batch_change: warn; sqrt would rescale it)"


def set_peak_lr(scheduler, lr: float) -> None:
    """Make ``lr`` the schedule's peak from its current step on (the optimizer's rate follows at once)."""
    scheduler.base_lrs = [lr] * len(scheduler.base_lrs)
    for group, factor in zip(scheduler.optimizer.param_groups, scheduler.lr_lambdas):
        group["initial_lr"] = lr
        group["lr"] = lr * factor(scheduler.last_epoch)
