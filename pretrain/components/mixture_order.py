"""The global sample order of a mixture of sources, in phases: position -> (source, sample index).

A run's samples are numbered 0, 1, 2, ... (all ranks together). ``data.phases`` cuts that numbering into
phases at fractions of the run (the first phase, or the only one without ``phases``, from 0): within a phase,
position ``j`` belongs to mixture block ``j // BLOCK`` counted from the phase's start, whose ``BLOCK`` slots
are split between the sources in proportion to the phase's weights (a share of training tokens; every
sample holds the same number of tokens) and shuffled, seeded by (phase, block). The k-th slot of a source
over the whole run, phases included, takes the k-th entry of that source's seeded permutation, a new
permutation each epoch of the source. So within an epoch of a source no sample repeats, a later phase goes on
with the samples the earlier ones left, and the order is a pure function of the position: resume, another
data-parallel size and a rollback land on the same samples.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from dataprep.core.errors import UsageError

BLOCK = 1024  # mixture resolution: weights are rounded to multiples of 1/BLOCK of the samples


def block_counts(weights: list[float], block: int = BLOCK) -> np.ndarray:
    """Slots per source in a block of ``block`` samples, proportional to the weights (largest remainder). A
    weight of 0 (a source a phase leaves out) gets none; a positive weight too small for one slot is refused."""
    w = np.asarray(weights, dtype=np.float64) / sum(weights)
    counts = np.floor(w * block).astype(np.int64)
    order = np.argsort(-(w * block - counts), kind="stable")
    counts[order[: block - counts.sum()]] += 1
    if ((counts == 0) & (w > 0)).any():
        raise UsageError(f"mixture weights {weights} give a source less than 1/{block} of the samples")
    return counts


class MixtureOrder:
    """Global sample position -> (source, sample index), deterministic given the seed. ``phases``: each
    phase's last position + 1 and weights (the last phase's end may be None: it runs on); None: one phase of
    ``weights``."""

    def __init__(
        self,
        sizes: list[int],
        weights: list[float],
        seed: int,
        phases: list[tuple[int | None, list[float]]] | None = None,
    ):
        self.sizes, self.seed = sizes, seed
        phases = phases or [(None, weights)]
        self.ends = [end if end is not None else np.iinfo(np.int64).max for end, _ in phases]
        self.starts = [0, *self.ends[:-1]]
        self.phase_counts = [block_counts(w) if len(sizes) > 1 else np.array([BLOCK]) for _, w in phases]
        self.counts = self.phase_counts[0]
        # small per-instance caches: consumption moves forward, so only the latest entries are reused
        self._block = lru_cache(maxsize=4)(self._make_block)
        self._permutation = lru_cache(maxsize=8)(self._make_permutation)
        # samples of each source drawn before each phase
        self._before = [np.zeros(len(sizes), dtype=np.int64)]
        for k in range(len(phases) - 1):
            self._before.append(self._before[-1] + self._drawn_in_phase(k, 0, self.ends[k] - self.starts[k]))

    @property
    def num_phases(self) -> int:
        return len(self.ends)

    def drawn_in_phase(self, consumed: int) -> tuple[int, np.ndarray]:
        """The phase of the last of ``consumed`` samples, and the samples each source has given in it so far."""
        k = self.phase(max(consumed - 1, 0))
        return k, self.drawn(self.starts[k], consumed)

    def phase(self, position: int) -> int:
        """The index of the phase ``position`` falls in."""
        return int(np.searchsorted(self.ends, position, side="right"))

    def _make_block(self, k: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        """Source of each slot of block ``b`` of phase ``k`` and the slot's rank among its source's slots."""
        counts = self.phase_counts[k]
        layout = np.repeat(np.arange(len(self.sizes)), counts)
        if len(self.sizes) > 1:  # phase 0 keeps the seeding of a run without phases
            layout = np.random.default_rng([self.seed, 1, b] if k == 0 else [self.seed, 1, b, k]).permutation(layout)
        rank = np.empty(BLOCK, dtype=np.int64)
        for s in range(len(self.sizes)):
            rank[layout == s] = np.arange(counts[s])
        return layout, rank

    def _make_permutation(self, source: int, epoch: int) -> np.ndarray:
        n = self.sizes[source]
        return (
            np.random.default_rng([self.seed, 2, source, epoch])
            .permutation(n)
            .astype(np.int64 if n >= 2**31 else np.int32)
        )

    def _drawn_in_phase(self, k: int, start: int, end: int) -> np.ndarray:
        """Samples each source gives at positions ``[start, end)`` of phase ``k`` (counted from its start):
        whole blocks by their counts, the partial blocks at either end by their layouts."""
        out = np.zeros(len(self.sizes), dtype=np.int64)
        first, last = -(-start // BLOCK), end // BLOCK  # the whole blocks inside the range
        if first >= last:
            for b in range(start // BLOCK, (end - 1) // BLOCK + 1) if end > start else ():
                lo, hi = max(start - b * BLOCK, 0), min(end - b * BLOCK, BLOCK)
                out += np.bincount(self._block(k, b)[0][lo:hi], minlength=len(self.sizes))
            return out
        out += (last - first) * self.phase_counts[k]
        if start < first * BLOCK:
            out += self._drawn_in_phase(k, start, first * BLOCK)
        if end > last * BLOCK:
            out += self._drawn_in_phase(k, last * BLOCK, end)
        return out

    def drawn(self, start: int, end: int) -> np.ndarray:
        """Samples each source gives at global positions ``[start, end)``, over the phases they span."""
        out = np.zeros(len(self.sizes), dtype=np.int64)
        for k, (lo, hi) in enumerate(zip(self.starts, self.ends)):
            a, b = max(start, lo), min(end, hi)
            if a < b:
                out += self._drawn_in_phase(k, a - lo, b - lo)
        return out

    def __call__(self, position: int) -> tuple[int, int]:
        k = self.phase(position)
        b, r = divmod(position - self.starts[k], BLOCK)
        layout, rank = self._block(k, b)
        s = int(layout[r])
        n = int(self._before[k][s]) + b * int(self.phase_counts[k][s]) + int(rank[r])  # samples of s before
        epoch, i = divmod(n, self.sizes[s])
        return s, int(self._permutation(s, epoch)[i])
