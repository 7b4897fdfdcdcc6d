"""Ctrl-C during a pipeline run: stop at once, keep what finished, print one line.

PySpark's own SIGINT handler raises KeyboardInterrupt wherever the main thread is, often inside a py4j
call, whose half-done state then prints tracebacks; and interrupted while its JVM starts, it leaves that
JVM running. Here the first Ctrl-C cancels Spark's jobs and stops the session from another thread, and
the run stops as the cancelled job returns or the next one fails to start (``interruptible``), or at its
next check (``check_interrupted``); a second Ctrl-C stops at once. Finished tasks have their markers, so the same command resumes.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager, suppress

_interrupted = threading.Event()


def _on_interrupt(signum, frame) -> None:
    """Ctrl-C: the first cancels Spark's jobs from another thread and lets the run stop at its next
    check (raising here, inside a py4j call, would print tracebacks of half-done calls); a second one
    stops at once."""
    if _interrupted.is_set():
        raise KeyboardInterrupt
    _interrupted.set()
    threading.Thread(target=_cancel_jobs, name="cancel-on-interrupt", daemon=True).start()


def _cancel_jobs() -> None:
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is not None:
        with suppress(Exception):  # the session is going away: nothing left to cancel
            context.setLogLevel("OFF")  # the cancelled jobs' errors are the interrupt's, not news
            context.cancelAllJobs()
            context.stop()  # so that no job starts after it either: the next one raises at once


def check_interrupted() -> None:
    """Raise KeyboardInterrupt once Ctrl-C was pressed (a point where stopping loses nothing)."""
    if _interrupted.is_set():
        raise KeyboardInterrupt


@contextmanager
def interruptible():
    """Whatever a job cancelled by Ctrl-C raises becomes the KeyboardInterrupt it stands for."""
    try:
        yield
    except Exception:
        if _interrupted.is_set():
            raise KeyboardInterrupt from None
        raise


@contextmanager
def held():
    """Hold a Ctrl-C while the JVM starts and raise it once the session exists: PySpark interrupted
    there leaves its JVM running with nobody to stop it. Once it is up, ``install`` takes over."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []

    def hold(signum, frame):
        held.append(signum)

    previous = signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGINT) is hold:  # SparkContext sets its own handler once started
            signal.signal(signal.SIGINT, previous)
    if held:
        raise KeyboardInterrupt


def install() -> None:
    """Make Ctrl-C cancel the jobs and stop the run at its next check (main thread only, as signals).
    Called for each new session: an interrupt that stopped an earlier one (a notebook) is forgotten."""
    _interrupted.clear()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _on_interrupt)
