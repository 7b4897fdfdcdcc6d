"""Faults injected on purpose, for tests and drills: ``pretrain train CONFIG --inject nan:step=12,rank=1``.

A spec is ``KIND:key=value,...``. ``nan``: that rank's loss, and so its gradients, NaN at that step;
``spike``: that rank's loss (and gradients) multiplied by ``scale`` (default 100) at that step;
``hang``: that rank blocks for good at the start of that step; ``kill``: that rank kills itself (SIGKILL,
as ``kill -9``) at the start of that step; ``slow:rank=R,ms=M``: that rank sleeps M ms in every step (from
``step``, default 1), as a throttled device or a slow disk would. Nothing is injected unless asked. Each
fault but ``slow`` fires once per run: the rank that fires it first writes ``faults/<spec>.fired`` in the
run folder, so a restarted process does not fire it again (``slow`` is how that rank is, restarts or not).
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass

from dataprep.core.errors import UsageError
from dataprep.core.storage import atomic_write_text

KINDS = {
    "nan": {"step", "rank"},
    "spike": {"step", "rank", "scale"},
    "hang": {"step", "rank"},
    "kill": {"step", "rank"},
    "slow": {"step", "rank", "ms"},
}  # each kind -> the keys it takes (all integers)
REQUIRED = {"nan": {"step"}, "spike": {"step"}, "hang": {"step"}, "kill": {"step"}, "slow": {"ms"}}
FIRED_DIR = "faults"


@dataclass(frozen=True)
class Fault:
    """One fault: what, at which step (1-based, as the metrics count steps) and on which global rank."""

    kind: str
    step: int = 1
    rank: int = 0
    scale: int = 100  # spike: the factor on the loss
    ms: int = 0  # slow: the sleep per step

    @property
    def name(self) -> str:
        return f"{self.kind}-step{self.step}-rank{self.rank}" + (f"-{self.ms}ms" if self.kind == "slow" else "")


def parse_fault(spec: str) -> Fault:
    """``nan:step=12,rank=1`` -> Fault; a clear error for anything else."""
    kind, _, arguments = spec.partition(":")
    if kind not in KINDS:
        raise UsageError(f"--inject {spec!r}: unknown fault {kind!r} (known: {', '.join(KINDS)})")
    values = {}
    for item in filter(None, arguments.split(",")):
        key, sep, value = item.partition("=")
        if not sep or key not in KINDS[kind]:
            raise UsageError(f"--inject {spec!r}: {item!r} is not one of {sorted(KINDS[kind])} as key=value")
        try:
            values[key] = int(value)
        except ValueError:
            raise UsageError(f"--inject {spec!r}: {key} must be an integer, got {value!r}") from None
    if missing := REQUIRED[kind] - set(values):
        raise UsageError(f"--inject {spec!r}: {', '.join(sorted(missing))}=N is required")
    if values.get("step", 1) <= 0 or values.get("rank", 0) < 0 or values.get("ms", 0) < 0:
        raise UsageError(f"--inject {spec!r}: step must be positive, rank and ms not negative")
    return Fault(kind, **values)


class FaultInjector:
    """The faults this rank was asked to inject and has not fired in this run folder yet."""

    def __init__(self, faults: list[Fault], run_dir: str, rank: int, world: int):
        for fault in faults:
            if fault.rank >= world:
                raise UsageError(f"--inject {fault.name}: there is no rank {fault.rank} among {world} processes")
        self.folder = os.path.join(run_dir, FIRED_DIR)
        self.pending = [f for f in faults if f.rank == rank and not os.path.exists(self._marker(f))]

    def _marker(self, fault: Fault) -> str:
        return os.path.join(self.folder, f"{fault.name}.fired")

    def fire(self, kind: str, step: int) -> bool:
        """Whether a fault of ``kind`` fires on this rank at ``step``; recorded before it takes effect."""
        return bool(self.take(kind, step))

    def take(self, kind: str, step: int) -> list[Fault]:
        """The faults of ``kind`` that fire on this rank at ``step`` (marked fired, so not again)."""
        due = [f for f in self.pending if f.kind == kind and f.step == step]
        for fault in due:
            os.makedirs(self.folder, exist_ok=True)
            atomic_write_text(self._marker(fault), json.dumps({"fault": fault.name, "time": time.time()}) + "\n")
            self.pending.remove(fault)
        return due

    def disrupt(self, step: int) -> None:
        """The hang, kill and slow faults due on this rank at the start of ``step``."""
        if self.fire("kill", step):
            os.kill(os.getpid(), signal.SIGKILL)
        if self.fire("hang", step):
            block_forever()
        slow_ms = sum(f.ms for f in self.pending if f.kind == "slow" and f.step <= step)
        if slow_ms:
            time.sleep(slow_ms / 1000)


def block_forever() -> None:
    """An injected hang: this rank never finishes its step (the watchdog's stack dump names this frame)."""
    while True:
        time.sleep(60)
