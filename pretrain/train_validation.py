"""Validation during a run: the loss on held-out samples, the best checkpoint it keeps (``checkpoint.keep_best``)
and the early stop once it no longer improves (``early_stop``)."""

from __future__ import annotations

import sys

from pretrain.components import checkpoint_folder
from pretrain.train_step import validation_loss


class TrainValidation:
    """A part of ``Trainer`` (pretrain/train.py), whose ``__init__`` sets up the state these methods use:
    validation, the best checkpoint and early stopping."""

    def _validate(self) -> None:
        loss = validation_loss(self.stepper, self.val_loader, self.cfg.log.val_batches, self.ctx, self.dims)
        self.log.write({"kind": "val", "step": self.state.step, "val_loss": loss})
        if self.best.observe(self.state.step, loss) and self.cfg.checkpoint.keep_best:
            self._save()
            self.settle_checkpoints()
            if self.rank == 0:
                checkpoint_folder.mark_best(self.last_checkpoint, loss, self.cfg.checkpoint.keep_last)
        self.log.start(self.state.step)  # the pause is not training time

    def _stop_early(self) -> dict:
        """``early_stop``: the validation loss stopped improving; the weights of this step are saved (the
        best checkpoint too, with ``keep_best``) and the run ends."""
        if self.saved_step != self.state.step:
            self._save()
        self.settle_checkpoints()
        record = self.best.record(self.state.step)
        self.log.write(record)
        if self.rank == 0:
            print(
                f"[train] early stop at step {self.state.step}: no validation improved on {self.best.loss:.4f} "
                f"(step {self.best.step}) by more than {self.best.min_delta:g} for {self.best.patience} "
                "validations",
                file=sys.stderr,
            )
        return record
