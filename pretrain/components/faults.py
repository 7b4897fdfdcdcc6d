"""Faults injected on purpose, for tests and drills: ``pretrain train CONFIG --inject nan:step=12,rank=1``.

A spec is ``KIND:key=value,...``. ``nan``: that rank's loss, and so its gradients, NaN at that step;
``spike``: that rank's loss (and gradients) multiplied by ``scale`` (default 100) at that step. Other kinds
parse the same way once ``KINDS`` names their keys.
Nothing is injected unless asked. Each fault fires once per run: the rank that fires it first writes
``faults/<spec>.fired`` in the run folder, so a restarted process does not fire it again.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

from dataprep.core.storage import atomic_write_text

KINDS = {"nan": {"step", "rank"}}  # each kind -> the keys it takes (all integers)
KINDS["spike"] = {"step", "rank", "scale"}
REQUIRED = {"step"}
FIRED_DIR = "faults"


@dataclass(frozen=True)
class Fault:
    """One fault: what, at which step (1-based, as the metrics count steps) and on which global rank."""

    kind: str
    step: int
    rank: int = 0
    scale: int = 100  # spike: the factor on the loss

    @property
    def name(self) -> str:
        return f"{self.kind}-step{self.step}-rank{self.rank}"


def parse_fault(spec: str) -> Fault:
    """``nan:step=12,rank=1`` -> Fault; a clear error for anything else."""
    kind, _, arguments = spec.partition(":")
    if kind not in KINDS:
        raise ValueError(f"--inject {spec!r}: unknown fault {kind!r} (known: {', '.join(KINDS)})")
    values = {}
    for item in filter(None, arguments.split(",")):
        key, sep, value = item.partition("=")
        if not sep or key not in KINDS[kind]:
            raise ValueError(f"--inject {spec!r}: {item!r} is not one of {sorted(KINDS[kind])} as key=value")
        try:
            values[key] = int(value)
        except ValueError:
            raise ValueError(f"--inject {spec!r}: {key} must be an integer, got {value!r}") from None
    if missing := REQUIRED - set(values):
        raise ValueError(f"--inject {spec!r}: {', '.join(sorted(missing))}=N is required")
    if values["step"] <= 0 or values.get("rank", 0) < 0:
        raise ValueError(f"--inject {spec!r}: step must be positive and rank not negative")
    return Fault(kind, **values)


class FaultInjector:
    """The faults this rank was asked to inject and has not fired in this run folder yet."""

    def __init__(self, faults: list[Fault], run_dir: str, rank: int, world: int):
        for fault in faults:
            if fault.rank >= world:
                raise ValueError(f"--inject {fault.name}: there is no rank {fault.rank} among {world} processes")
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
