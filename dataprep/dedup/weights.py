"""Duplicate-aware sampling weights (FineWeb-2's "rehydration"): the copy dedup keeps of a cluster gets
a weight chosen by the cluster's size, so a training mix can repeat documents that many pages
copied (a sign of value) without keeping the copies themselves.

The table maps cluster sizes to weights: ``{"1": 1, "2": 2, "3-4": 3, "5-100": 5, "101+": 1}``; sizes
it does not name weigh 1. The column written is ``sample_weight`` (float) on every row.
"""

from __future__ import annotations

import re

from dataprep.core.errors import UsageError

WEIGHT = "sample_weight"
# Published tables, by name. fineweb2: FineWeb-2's README, "Deduplication" (github.com/huggingface/fineweb-2):
# no duplicates 1, clusters of 2 and 3 their size, 4: 3, 5-99: 5, 100-999: 8, 1000 and more: 1.
NAMED_TABLES: dict[str, dict[str, float]] = {
    "fineweb2": {"1": 1, "2": 2, "3": 3, "4": 3, "5-99": 5, "100-999": 8, "1000+": 1},
}
_RANGE = re.compile(r"^\s*(\d+)\s*(?:(-)\s*(\d+)|(\+))?\s*$")


def named_table(table: dict[str, float] | str) -> dict[str, float]:
    """``table`` itself, or the published table it names (``NAMED_TABLES``)."""
    if isinstance(table, dict):
        return table
    if table not in NAMED_TABLES:
        raise UsageError(
            f"sample_weights: no table named {table!r} (named tables: {', '.join(sorted(NAMED_TABLES))}; or "
            "give a mapping)"
        )
    return NAMED_TABLES[table]


def parse_weights(table: dict[str, float] | str) -> list[tuple[int, int | None, float]]:
    """[(lowest size, highest size or None for no limit, weight)], sorted; overlapping or malformed
    ranges and negative weights are errors that name the entry. A name picks a published table."""
    table = named_table(table)
    ranges = []
    for key, weight in table.items():
        match = _RANGE.match(str(key))
        if not match:
            raise UsageError(f"sample_weights: {key!r} is not a size, a range 'A-B' or 'A+'")
        low = int(match[1])
        high = None if match[4] else int(match[3]) if match[2] else low
        if low < 1 or (high is not None and high < low) or weight < 0:
            raise UsageError(f"sample_weights: {key!r}: {weight} is not a valid size range and weight")
        ranges.append((low, high, float(weight)))
    ranges.sort(key=lambda r: r[0])
    for (_, high, _), (low, _, _) in zip(ranges, ranges[1:]):
        if high is None or high >= low:
            raise UsageError(f"sample_weights: ranges overlap at size {low}")
    return ranges


def weights_for(sizes: list[int], ranges: list[tuple[int, int | None, float]]) -> list[float]:
    """The weight of each cluster size (1.0 where no range covers it)."""

    def weight(size: int) -> float:
        for low, high, w in ranges:
            if low <= size and (high is None or size <= high):
                return w
        return 1.0

    return [weight(s) for s in sizes]
