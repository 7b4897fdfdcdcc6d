"""The hang watchdog: a rank that finishes no step within ``health.hang_timeout`` seconds writes every
thread's stack to ``OUT_DIR/hangs/rank-R.txt``, says which rank and step, and exits (``HANG_EXIT``), so that
the launcher (torchrun ``--max-restarts``, a Slurm requeue) starts the job again from its last checkpoint.

Without it a rank stuck in a collective holds every other rank until the backend's own timeout, and
nothing says where it hung. The watchdog is a daemon thread woken every few seconds; the loop tells it
of each finished step (``progress``). The first step of a process gets ``first_step_timeout`` (compilation,
cold caches, the first collectives). The process group's timeout is the larger of the two (see
``process_group_timeout``): a rank blocked in a collective past it raises, a backstop behind the watchdog.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import sys
import threading
import time
from datetime import timedelta

HANG_EXIT = 4  # the exit status of a process the watchdog ended
HANGS_DIR = "hangs"
GRACE_POLLS = 2  # polls to wait between the stack dump and the exit


def process_group_timeout(health) -> timedelta:
    """The process group's collective timeout for a run's ``health`` settings."""
    return timedelta(seconds=max(health.hang_timeout, health.first_step_timeout))


class Watchdog:
    """Ends this process, with its stacks on file, when no step finishes in time (``watching``)."""

    def __init__(
        self, out_dir: str, rank: int, hang_timeout: float, first_step_timeout: float, metrics_file: str | None = None
    ):
        self.out_dir, self.rank, self.metrics_file = out_dir, rank, metrics_file
        self.hang_timeout, self.first_step_timeout = hang_timeout, first_step_timeout
        self.poll_s = min(5.0, hang_timeout / 4)
        self._stop = threading.Event()
        self._step, self._since, self._limit = 0, time.monotonic(), first_step_timeout

    def progress(self, step: int) -> None:
        """Step ``step`` finished: the clock starts again, with ``hang_timeout`` from now on."""
        self._step, self._since, self._limit = step, time.monotonic(), self.hang_timeout

    @contextlib.contextmanager
    def watching(self, step: int):
        """Watch while the block runs, starting after step ``step`` (its first step: ``first_step_timeout``)."""
        self._step, self._since, self._limit = step, time.monotonic(), self.first_step_timeout
        self._stop.clear()
        thread = threading.Thread(target=self._watch, name=f"hang-watchdog-rank{self.rank}", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join()

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_s):
            waited = time.monotonic() - self._since
            if waited > self._limit:
                self._hung(waited)

    def _hung(self, waited: float) -> None:
        """Record where every thread is, say so, and end the process at once (no cleanup can be trusted)."""
        folder = os.path.join(self.out_dir, HANGS_DIR)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"rank-{self.rank}.txt")
        what = (
            f"rank {self.rank}: no step finished for {waited:.1f} s after step {self._step} (limit {self._limit:g} s)"
        )
        with open(path, "a", encoding="utf-8") as f:  # a restarted process that hangs again adds to it
            f.write(f"== {time.strftime('%Y-%m-%d %H:%M:%S')} pid {os.getpid()}: {what}\n")
            f.flush()
            faulthandler.dump_traceback(file=f, all_threads=True)
        print(
            f"[watchdog] {what}: every thread's stack is in {path}; exiting with status {HANG_EXIT}",
            file=sys.stderr,
            flush=True,
        )
        self._write_record(
            {
                "kind": "hang",
                "step": self._step,
                "rank": self.rank,
                "cause": "no step finished",
                "waited_s": round(waited, 3),
                "limit_s": self._limit,
                "stacks": path,
            }
        )
        # The other ranks stopped at the same step reach their limit within about a poll: waiting lets them
        # write their stacks too before the launcher, seeing this one exit, stops them.
        time.sleep(GRACE_POLLS * self.poll_s)
        os._exit(HANG_EXIT)

    def _write_record(self, record: dict) -> None:
        """Append the event to the metrics file (whichever rank hung; one small append-mode write)."""
        if not self.metrics_file:
            return
        line = (json.dumps({"time": time.time(), **record}) + "\n").encode()
        fd = os.open(self.metrics_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
