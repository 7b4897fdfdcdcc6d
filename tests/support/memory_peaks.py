"""Resident memory of this process from /proc/self/status, and how far a call raises its peak."""

from __future__ import annotations


def status_bytes(key: str) -> int:
    """Bytes of a /proc/self/status memory line (VmRSS, VmHWM)."""
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith(key + ":"))


def peak_growth(fn) -> tuple[object, int]:
    """fn's result and how far the resident size rose above where it started, at its peak."""
    before = status_bytes("VmRSS")
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")  # resets VmHWM, the peak resident size, to the current size
    out = fn()
    return out, status_bytes("VmHWM") - before
