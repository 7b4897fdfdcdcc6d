"""A time limit for a block of Python code in the worker's own process: a timer signal, no process
per call, so a slow page costs its limit and nothing more. The limit counts the process's CPU time, not the
wall clock, so a busy machine (other executors, other jobs) does not time out pages that are not slow."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager


class ExtractionTimeout(BaseException):
    (
        """Raised inside the limited block (Trafilatura) by the timer; a BaseException so its own ``except """
        """Exception`` cannot hide it."""
    )


@contextmanager
def time_limit(seconds: float | None):
    """Interrupt the block after ``seconds`` of CPU time with ExtractionTimeout (SIGPROF: main thread on POSIX
    only; elsewhere the block runs unlimited)."""
    if not seconds or not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum, frame):
        raise ExtractionTimeout(f"over {seconds}s of CPU")

    previous = signal.signal(signal.SIGPROF, on_alarm)
    signal.setitimer(signal.ITIMER_PROF, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)
