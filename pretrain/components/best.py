"""The best validation loss so far: which validation improved on it (``checkpoint.keep_best`` saves a
checkpoint there) and how many in a row did not (``early_stop`` ends the run after ``patience``).
A ``Stateful`` in the checkpoint's train state, so a resumed run remembers its best."""

from __future__ import annotations

import math


class BestValidation:
    """``observe`` each validation loss; ``improved`` says whether it is the lowest so far, ``exhausted``
    whether the last ``patience`` validations each failed to beat the best by more than ``min_delta``."""

    def __init__(self, patience: int | None = None, min_delta: float = 0.0):
        self.patience, self.min_delta = patience, min_delta
        self.loss, self.step, self.stale = math.inf, None, 0

    def observe(self, step: int, loss: float) -> bool:
        """Record the validation at ``step``; returns whether it is the best so far."""
        self.stale = 0 if loss < self.loss - self.min_delta else self.stale + 1
        if loss < self.loss:
            self.loss, self.step = loss, step
            return True
        return False

    @property
    def exhausted(self) -> bool:
        return self.patience is not None and self.stale >= self.patience

    def record(self, step: int) -> dict:
        """The ``kind: early_stop`` metrics record."""
        return {
            "kind": "early_stop",
            "step": step,
            "best_step": self.step,
            "best_val_loss": self.loss,
            "patience": self.patience,
            "min_delta": self.min_delta,
        }

    def state_dict(self) -> dict:
        return {"loss": None if math.isinf(self.loss) else self.loss, "step": self.step, "stale": self.stale}

    def load_state_dict(self, state: dict) -> None:
        self.loss = math.inf if state["loss"] is None else float(state["loss"])
        self.step, self.stale = state["step"], int(state["stale"])
