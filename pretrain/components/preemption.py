"""Stopping on a signal: Ctrl-C (SIGINT) or SIGTERM (Slurm's pre-emption and time-limit signal, and what
torchrun forwards to its workers) ends the run after the step in progress, with a checkpoint of that step.

The handler only records the signal. At each step boundary every rank asks ``agreed()``: one process
answers alone; several all-reduce their flags (MAX) on the CPU, over a gloo group, so the answer is the same
on every rank at the same step even when the signal reached only some of them, and they all stop there and
save together (a rank that stopped alone would leave the others waiting in the checkpoint's collectives).
The CPU all-reduce never waits for the accelerator. Repeated signals (torchrun forwards the one the terminal
already sent to every process) change nothing.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from datetime import timedelta

import torch
import torch.distributed as dist

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Stopped(Exception):
    """The run stopped on a signal (after saving its step, when it had trained one); ``exit_status`` is the
    shell's 128 + the signal's number."""

    def __init__(self, signal_name: str, step: int | None, checkpoint: str | None):
        self.signal_name, self.step, self.checkpoint = signal_name, step, checkpoint
        self.exit_status = 128 + signal.Signals[signal_name].value
        if step is None:
            message = (
                f"stopped by {signal_name} during set-up, before any step: nothing to save; run the same command again"
            )
        else:
            saved = f"saved {checkpoint}" if checkpoint else "no step trained, nothing to save"
            message = (
                f"stopped by {signal_name} at step {step}: {saved}; continue with the same command and --resume auto"
            )
        super().__init__(message)


@contextlib.contextmanager
def stop_at_once():
    """While the block runs (set-up: there is nothing to save yet), SIGINT or SIGTERM raises ``Stopped``."""

    def stop(signum: int, frame):
        raise Stopped(signal.Signals(signum).name, None, None)

    with _handling(stop):
        yield


@contextlib.contextmanager
def _handling(handler, keep=lambda: False):
    """``handler`` for SIGINT and SIGTERM while the block runs, and after it too when ``keep()`` says so
    (Python runs handlers in the main thread only: elsewhere the block runs with the handlers as they are)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig in SIGNALS}
    try:
        yield
    finally:
        if not keep():
            for sig, old in previous.items():
                signal.signal(sig, old)


class StopSignal:
    """SIGINT and SIGTERM noted while ``catching``; ``agreed()`` at a step boundary says whether to stop."""

    def __init__(self, world: int, rank: int, timeout: timedelta | None = None):
        self.world, self.rank = world, rank
        self.received: str | None = None  # the first signal's name
        self._flag = torch.zeros(1, dtype=torch.int32)
        self._group = None  # None: the default group, when it is gloo already
        if world > 1 and dist.get_backend() != "gloo":  # the flag stays on the CPU, off the accelerator's stream
            self._group = dist.new_group(backend="gloo", timeout=timeout)

    @contextlib.contextmanager
    def catching(self):
        """Note SIGINT and SIGTERM instead of dying while the block runs. Once stopping, later signals (a
        launcher's, once a peer has exited) are noted until the process exits, so they cannot cut its last
        line short."""
        with _handling(self._note, keep=lambda: self.received is not None):
            yield self

    def _note(self, signum: int, frame) -> None:
        if self.received is not None:
            return
        self.received = signal.Signals(signum).name
        if self.rank == 0:
            print(f"[train] {self.received}: stopping after this step, with a checkpoint", file=sys.stderr, flush=True)

    def agreed(self) -> bool:
        """Whether every rank stops here: any rank's signal counts for all. With several ranks the answer is
        the reduced flag alone (a signal arriving during the collective counts at the next boundary)."""
        if self.world == 1:
            return self.received is not None
        self._flag.fill_(signal.Signals[self.received].value if self.received else 0)
        dist.all_reduce(self._flag, op=dist.ReduceOp.MAX, group=self._group)
        value = int(self._flag.item())
        if value and self.received is None:  # another rank's signal
            self.received = signal.Signals(value).name
        return value > 0
