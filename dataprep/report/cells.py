"""How the report writes numbers in its tables: counts, shares of a whole, sizes and measured values."""

from __future__ import annotations

from dataprep.core.units import human


def count(v) -> str:
    return f"{int(v):,}"


def percent(part, whole) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def byte_size(v) -> str:
    return human(v, "B")


def number(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"
