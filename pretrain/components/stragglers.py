"""Straggler records: every ``health.straggler_every_steps`` steps each rank's timings and peak memory are
gathered (one all-reduce of a small table, a row per rank) and rank 0 logs a ``kind: stragglers`` record:
min/median/max of the step time, the data wait and the lag, the slowest rank, and peak memory.

In synchronous training every rank's step takes as long as the slowest rank's, so step times alone do not
say who is slow. The lag does: at a sampled step every rank, once it holds its batch, enters a barrier and
times how long it waits there; the last rank to arrive waits least, and a rank's lag is the longest wait
less its own. It catches slowness between the previous step's last collective and the barrier (data,
host work, a device that finishes late); a rank whose lag exceeds the median lag by more than
``straggler_margin`` of the median step time is named in a warning.
"""

from __future__ import annotations

import contextlib
import resource
import statistics
import sys
import time

import torch
import torch.distributed as dist

COLUMNS = ("step_s", "data_wait_s", "wait_s", "peak_memory_gib")


def peak_memory_gib(device: torch.device) -> float:
    """The most memory this process has held: allocated on the accelerator (CUDA), else resident."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def _spread(values: list[float]) -> dict:
    return {"min": round(min(values), 6), "median": round(statistics.median(values), 6), "max": round(max(values), 6)}


class StragglerMonitor:
    """Times this rank's steps and data waits; every ``every`` steps (0: never) compares the ranks."""

    def __init__(self, every: int, margin: float, device: torch.device, rank: int, world: int):
        self.every, self.margin, self.device, self.rank, self.world = every, margin, device, rank, world
        self._reset()

    def _reset(self) -> None:
        self._steps, self._step_s, self._data_s, self._wait_s = 0, 0.0, 0.0, 0.0

    def sampled(self, step: int) -> bool:
        """Whether step ``step`` gathers every rank's figures (a collective)."""
        return self.every > 0 and step % self.every == 0

    @contextlib.contextmanager
    def timing(self, step: int):
        """Time step ``step`` (the block); the block fetches its batch through ``batch``."""
        start = time.perf_counter()
        yield lambda fetch: self._batch(step, fetch)
        self._step_s += time.perf_counter() - start
        self._steps += 1

    def _batch(self, step: int, fetch):
        """``fetch()``, timed as data wait; on a sampled step, then the timed barrier (a collective)."""
        start = time.perf_counter()
        batch = fetch()
        arrived = time.perf_counter()
        self._data_s += arrived - start
        if self.sampled(step) and self.world > 1:
            dist.barrier()
            self._wait_s = time.perf_counter() - arrived
        return batch

    def gather(self, step: int) -> dict | None:
        """After a sampled step, every rank's figures in one record (the same on every rank; a collective);
        None on other steps. Rank 0 warns of ranks that lag."""
        if not self.sampled(step) or not self._steps:
            return None
        table = torch.zeros(self.world, len(COLUMNS), dtype=torch.float64, device=self.device)
        table[self.rank] = torch.tensor(
            [self._step_s / self._steps, self._data_s / self._steps, self._wait_s, peak_memory_gib(self.device)],
            dtype=torch.float64,
        )
        if self.world > 1:
            dist.all_reduce(table)
        steps = self._steps
        self._reset()
        step_s, data_s, wait_s, memory = (table[:, i].tolist() for i in range(len(COLUMNS)))
        record = self.record(step, steps, step_s, data_s, wait_s, memory)
        if self.rank == 0:
            for rank in record["slow_ranks"]:
                print(
                    f"[train] warning: step {step}: rank {rank} is a straggler: it reached the step "
                    f"{record['lag_s_by_rank'][rank]:.3f} s after the fastest rank, against a median lag of "
                    f"{record['lag_s']['median']:.3f} s and a median step of {record['step_s']['median']:.3f} s",
                    file=sys.stderr,
                    flush=True,
                )
        return record

    def record(
        self, step: int, steps: int, step_s: list[float], data_s: list[float], wait_s: list[float], memory: list[float]
    ) -> dict:
        """The ``stragglers`` record from each rank's mean step time, mean data wait, barrier wait and peak
        memory."""
        lag = [max(wait_s) - w for w in wait_s]
        median_lag, median_step = statistics.median(lag), statistics.median(step_s)
        slow = [r for r, value in enumerate(lag) if value - median_lag > self.margin * median_step]
        return {
            "kind": "stragglers",
            "step": step,
            "steps": steps,
            "ranks": len(step_s),
            "step_s": _spread(step_s),
            "data_wait_s": _spread(data_s),
            "lag_s": _spread(lag),
            "slowest_rank": max(range(len(lag)), key=lag.__getitem__),
            "slow_ranks": slow,
            "lag_s_by_rank": [round(value, 6) for value in lag],
            "peak_memory_gib": _spread(memory),
            "peak_memory_rank": max(range(len(memory)), key=memory.__getitem__),
        }
