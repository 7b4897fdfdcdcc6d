"""Checkpoints and what a run recovers from: saving (blocking or in the background), the step a signal
stopped at, skipped non-finite steps, and loss spikes rolled back to the checkpoint before them."""

from __future__ import annotations

import time

from pretrain.components import checkpoint, checkpoint_folder
from pretrain.components.guard import NonFinite
from pretrain.components.spikes import Spike, SpikeError
from pretrain.distributed.process_group import barrier


class TrainRecovery:
    """A part of ``Trainer`` (pretrain/train.py), whose ``__init__`` sets up the state these methods use:
    checkpoints, and the verdicts' consequences (skips, spikes, rollbacks)."""

    def _read_verdicts(self) -> bool:
        """Act on the verdicts kept since the last read, in step order: count and log skipped steps (too
        many in a row: checkpoint and stop), log spikes and roll back. Returns whether the run rolled back."""
        for step, found, spike in self.verdicts.read():
            if self.cfg.guard:
                self._count_skip(step, found)
            if spike is not None and self._on_spike(spike):
                return True
        return False

    def _on_spike(self, spike: Spike) -> bool:
        """Log the spike and keep the last checkpoint before it; under rollback, reload that checkpoint and
        skip ahead in the data order. Returns whether the run rolled back (without a checkpoint before the
        spike it cannot: the update was held back, as under skip)."""
        policy = self.cfg.spikes
        self.settle_checkpoints()  # the checkpoint before the spike may still be being written
        before = checkpoint_folder.latest_before(self.ckpt_root, spike.step)
        if before is not None and self.rank == 0:
            checkpoint_folder.pin(before, f"the last checkpoint before the loss spike at step {spike.step}")
        self.log.write(spike.record(policy.policy, before))
        if policy.policy != "rollback" or before is None:
            return False
        if self.rollbacks == policy.max_rollbacks:
            raise SpikeError(
                f"step {spike.step}: a loss spike ({spike.loss:.4g}, above {spike.limit:.4g}) after "
                f"{self.rollbacks} rollbacks (spikes.max_rollbacks): stopped; look at the data and the "
                f"learning rate, then resume from {before} with --resume"
            )
        checkpoint.load(before, self.model_state, self.state)
        self.saved_step = None  # the steps ahead are trained anew: their checkpoints are written again
        skipped = max(policy.skip_batches, spike.step - self.state.step)  # at least through the spike's batch
        self.train_loader.skip(skipped)
        self.rollbacks += 1
        self.log.write(
            {
                "kind": "rollback",
                "step": spike.step,
                "rank": spike.rank,
                "cause": "loss spike",
                "to_step": self.state.step,
                "checkpoint": before,
                "skipped_batches": skipped,
                "samples_consumed": self.train_loader.consumed,
                "rollbacks": self.rollbacks,
            }
        )
        self.log.start(self.state.step)
        return True

    def _count_skip(self, step: int, found: NonFinite | None) -> None:
        """Log a skipped step; past ``max_consecutive_skips`` in a row, checkpoint and stop with the reason."""
        if not self.skips.count(found):
            return
        self.log.write(self.skips.record(step, found))
        if self.skips.exhausted:
            self._save()
            raise self.skips.error(step, found)

    def _save(self) -> None:
        """Save (or start saving) a checkpoint; the time it blocked the loop goes into the metrics, where
        ``pretrain plan --save-from`` reads it."""
        save = self.saver.save if self.saver else checkpoint.save
        started = time.perf_counter()
        self.last_checkpoint = save(self.ckpt_root, self.model_state, self.state, self.cfg.checkpoint.keep_last)
        self.saved_step = self.state.step
        self.log.write(
            {
                "kind": "checkpoint",
                "step": self.state.step,
                "blocking_s": time.perf_counter() - started,
                "async": self.saver is not None,
            }
        )
        self.log.start(self.state.step)

    def _stop_here(self) -> None:
        """On a signal: checkpoint the step every rank stopped at (unless it is saved already) and log it."""
        saved = self.last_checkpoint and checkpoint_folder.checkpoint_step(self.last_checkpoint) == self.state.step
        if self.state.step > 0 and not saved:
            self._save()
        self.last_checkpoint = self.last_checkpoint or checkpoint_folder.latest_before(
            self.ckpt_root, self.state.step + 1
        )
        self.log.write(
            {"kind": "stop", "step": self.state.step, "signal": self.stop.received, "checkpoint": self.last_checkpoint}
        )

    def settle_checkpoints(self) -> None:
        """Wait until a checkpoint written in the background is committed, on every rank."""
        if self.saver is not None:
            self.saver.wait()
            barrier()
