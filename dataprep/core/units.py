"""Numbers for people: ``human(12_345_678) == '12.3M'``, ``human(3.2e9, 'B') == '3.2GB'``,
``duration(75) == '1m15s'``."""

from __future__ import annotations

_COUNTS = (("E", 1e18), ("P", 1e15), ("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3))
_BYTES = (("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("K", 1e3))


def human(x: float, unit: str = "") -> str:
    """Three significant figures with an SI-like suffix; counts use B for billions (7B parameters),
    bytes (``unit='B'``) use G (3.2GB)."""
    for suffix, scale in _BYTES if unit == "B" else _COUNTS:
        if abs(x) >= scale:
            return f"{x / scale:.3g}{suffix}{unit}"
    return f"{x:.3g}{unit}"


def duration(seconds: float) -> str:
    """Minutes and seconds, or hours and minutes from an hour on: what a progress line needs."""
    seconds = int(seconds)
    return (
        f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"
    )
