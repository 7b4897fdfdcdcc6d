"""Per-stage bookkeeping: documents and bytes in, kept, dropped by reason, errors (with their messages
and the first few tracebacks), wall time, and the events a stage counts itself (``Stage.count``).

One ``StageStats`` per stage; they add up across batches, partitions and executors (``merge``), are
saved as JSON and printed as the end-of-run table. Reasons starting with ``error:`` are errors, and a
stage with more errors than the error budget allows fails its step (``over_budget`` names them, ``describe_errors`` says
why).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import pyarrow as pa

from dataprep.core.errors import WorkFailed
from dataprep.core.stage import DROP_REASON, ErrorLog, StageResult, payload_bytes
from dataprep.core.units import human

# Counter prefix of input records that are no documents (WARC requests, warcinfo, metadata, ...): the
# reader counts them by record type, apart from the documents it reads (kept or dropped).
RECORDS_SKIPPED = "records_skipped:"
STATS_MARK = "__stats__"  # drop_stage/drop_reason of the stats rows older versions wrote into step data


# The stats.json fields that differ from run to run of the same input (timings, and how tasks split it)
TIMING_FIELDS = (
    "seconds",
    "cpu_seconds",
    "first_batch_cpu_seconds",
    "first_batch_docs",
    "executor_seconds",
    "executor_cpu_seconds",
    "executor_fixed_cpu_seconds",
)


@dataclass
class StageStats:
    stage: str
    docs_in: int = 0
    bytes_in: int = 0
    docs_kept: int = 0
    bytes_kept: int = 0
    dropped: Counter = field(default_factory=Counter)  # reason -> documents
    dropped_bytes: Counter = field(default_factory=Counter)  # reason -> text bytes
    seconds: float = 0.0
    cpu_seconds: float = 0.0  # CPU of the stage's own code in the tasks (0 for whole-corpus steps, run by Spark)
    # The part of cpu_seconds spent on each task's first batch, and its documents: loading lists and models
    # happens there, so the estimate can tell a worker's fixed cost from the cost per document
    first_batch_cpu_seconds: float = 0.0
    first_batch_docs: int = 0
    # Whole-corpus steps: the seconds their Spark tasks ran (Spark's task metrics, summed over the step's
    # jobs) and the CPU seconds of their JVM threads and Python workers
    executor_seconds: float = 0.0
    executor_cpu_seconds: float = 0.0
    # The part of executor_cpu_seconds that does not grow with documents (per Spark stage its costliest task,
    # which started the stage; per Python call what it cost before its rows); the estimate keeps it apart
    executor_fixed_cpu_seconds: float = 0.0
    counters: Counter = field(default_factory=Counter)  # the stage's own events (Stage.count)
    errors_seen: ErrorLog = field(default_factory=ErrorLog)  # messages and first tracebacks of error: drops
    notes: dict = field(default_factory=dict)  # values the stage applied (Stage.note), e.g. a cut-off

    @property
    def docs_dropped(self) -> int:
        return sum(self.dropped.values())

    @property
    def records_skipped(self) -> dict[str, int]:
        """Input records that are no documents, by record type (readers only)."""
        return {
            k.removeprefix(RECORDS_SKIPPED): n
            for k, n in sorted(self.counters.items())
            if k.startswith(RECORDS_SKIPPED)
        }

    @property
    def errors(self) -> int:
        return sum(n for reason, n in self.dropped.items() if reason.startswith("error:"))

    def record(
        self,
        batch_in: pa.Table | None,
        result: StageResult,
        seconds: float = 0.0,
        bytes_in: int | None = None,
        cpu_seconds: float = 0.0,
        first_batch: bool = False,
    ) -> None:
        """Count one batch: what went in (None for readers, whose input is a file: ``bytes_in`` then
        gives the bytes read) and what came out. Bytes are text plus raw HTML payload."""
        kept_bytes = payload_bytes(result.kept)
        reasons = result.dropped.column(DROP_REASON).to_pylist() if result.dropped.num_rows else []
        if result.dropped.num_rows and "text" in result.dropped.column_names:
            sizes = [
                len(t.encode("utf-8", "surrogatepass")) if t else 0 for t in result.dropped.column("text").to_pylist()
            ]
        else:
            sizes = [0] * len(reasons)
        for reason, size in zip(reasons, sizes):
            self.dropped[reason] += 1
            self.dropped_bytes[reason] += size
        if batch_in is not None:
            self.docs_in += batch_in.num_rows
            self.bytes_in += payload_bytes(batch_in)
        else:
            self.docs_in += result.kept.num_rows + len(reasons)
            self.bytes_in += bytes_in if bytes_in is not None else kept_bytes + sum(sizes)
        self.docs_kept += result.kept.num_rows
        self.bytes_kept += kept_bytes
        self.seconds += seconds
        self.cpu_seconds += cpu_seconds
        if first_batch:
            self.first_batch_cpu_seconds += cpu_seconds
            self.first_batch_docs += batch_in.num_rows if batch_in is not None else result.kept.num_rows + len(reasons)

    def record_counters(self, stage) -> None:
        """Add the events and errors ``stage`` counted since the last call."""
        self.counters.update(stage.take_counters())
        self.errors_seen.merge(stage.take_errors())
        self.notes.update(stage.take_notes())

    def merge(self, other: "StageStats") -> "StageStats":
        self.docs_in += other.docs_in
        self.bytes_in += other.bytes_in
        self.docs_kept += other.docs_kept
        self.bytes_kept += other.bytes_kept
        self.dropped.update(other.dropped)
        self.dropped_bytes.update(other.dropped_bytes)
        self.seconds += other.seconds
        self.cpu_seconds += other.cpu_seconds
        self.first_batch_cpu_seconds += other.first_batch_cpu_seconds
        self.first_batch_docs += other.first_batch_docs
        self.executor_seconds += other.executor_seconds
        self.executor_cpu_seconds += other.executor_cpu_seconds
        self.executor_fixed_cpu_seconds += other.executor_fixed_cpu_seconds
        self.counters.update(other.counters)
        self.errors_seen.merge(other.errors_seen)
        self.notes.update(other.notes)
        return self

    def to_dict(self) -> dict:
        return {
            "stage": self.stage,
            "docs_in": self.docs_in,
            "bytes_in": self.bytes_in,
            "docs_kept": self.docs_kept,
            "bytes_kept": self.bytes_kept,
            "docs_dropped": self.docs_dropped,
            "errors": self.errors,
            "dropped": dict(sorted(self.dropped.items(), key=lambda kv: -kv[1])),
            "dropped_bytes": dict(self.dropped_bytes),
            "seconds": round(self.seconds, 3),
            "cpu_seconds": round(self.cpu_seconds, 3),
            **(
                {
                    "first_batch_cpu_seconds": round(self.first_batch_cpu_seconds, 3),
                    "first_batch_docs": self.first_batch_docs,
                }
                if self.first_batch_docs
                else {}
            ),
            **(
                {
                    "executor_seconds": round(self.executor_seconds, 3),
                    "executor_cpu_seconds": round(self.executor_cpu_seconds, 3),
                }
                if self.executor_seconds
                else {}
            ),
            **(
                {"executor_fixed_cpu_seconds": round(self.executor_fixed_cpu_seconds, 3)}
                if self.executor_fixed_cpu_seconds
                else {}
            ),
            "counters": dict(sorted(self.counters.items())),
            **self.errors_seen.to_dict(),
            **({"notes": self.notes} if self.notes else {}),
        }

    @classmethod
    def from_dict(cls, d: dict) -> "StageStats":
        return cls(
            stage=d["stage"],
            docs_in=d["docs_in"],
            bytes_in=d["bytes_in"],
            docs_kept=d["docs_kept"],
            bytes_kept=d["bytes_kept"],
            dropped=Counter(d.get("dropped", {})),
            dropped_bytes=Counter(d.get("dropped_bytes", {})),
            seconds=d.get("seconds", 0.0),
            cpu_seconds=d.get("cpu_seconds", 0.0),
            first_batch_cpu_seconds=d.get("first_batch_cpu_seconds", 0.0),
            first_batch_docs=d.get("first_batch_docs", 0),
            executor_seconds=d.get("executor_seconds", 0.0),
            executor_cpu_seconds=d.get("executor_cpu_seconds", 0.0),
            executor_fixed_cpu_seconds=d.get("executor_fixed_cpu_seconds", 0.0),
            counters=Counter(d.get("counters", {})),
            errors_seen=ErrorLog.from_dict(d),
            notes=dict(d.get("notes", {})),
        )


def merge_all(stats: Iterable[StageStats]) -> list[StageStats]:
    """Merge per-batch stats (a list, or a generator read as it goes) into one per stage, keeping
    first-seen stage order."""
    merged: dict[str, StageStats] = {}
    for s in stats:
        if s.stage not in merged:
            merged[s.stage] = StageStats(s.stage)
        merged[s.stage].merge(s)
    return list(merged.values())


def save_json(stats: list[StageStats], path: str, extra: dict | None = None) -> None:
    from dataprep.core.storage import atomic_write_text

    payload = {"stages": [s.to_dict() for s in stats], **(extra or {})}
    atomic_write_text(path, json.dumps(payload, indent=2, ensure_ascii=False))


def format_table(stats: list[StageStats], top_reasons: int = 4) -> str:
    """The end-of-run funnel: one line per stage, then its main drop reasons indented below."""
    header = (
        f"{'stage':<22}{'docs in':>10}{'kept':>10}{'dropped':>10}{'errors':>8}{'bytes in':>10}"
        f"{'bytes kept':>11}{'sec':>8}"
    )
    lines = [header, "-" * len(header)]
    for s in stats:
        lines.append(
            f"{s.stage:<22}{s.docs_in:>10}{s.docs_kept:>10}{s.docs_dropped:>10}{s.errors:>8}"
            f"{human(s.bytes_in, 'B'):>10}{human(s.bytes_kept, 'B'):>11}{s.seconds:>8.1f}"
        )
        for reason, n in s.dropped.most_common(top_reasons):
            lines.append(f"    {reason:<40}{n:>10}")
        if len(s.dropped) > top_reasons:
            rest = sum(n for _, n in s.dropped.most_common()[top_reasons:])
            lines.append(f"    {'(other reasons)':<40}{rest:>10}")
        for event, n in sorted(s.counters.items()):
            lines.append(f"    {'counted: ' + event:<40}{n:>10}")
    return "\n".join(lines)


class ErrorBudgetExceeded(WorkFailed):
    """A stage failed on more documents than the error budget allows: its step must not count as done."""


def over_budget(stats: list[StageStats], max_fraction: float, min_errors: int) -> list[StageStats]:
    """The stages whose errors exceed both ``min_errors`` and ``max_fraction`` of their documents."""
    return [s for s in stats if s.errors > min_errors and s.errors > max_fraction * s.docs_in]


def describe_errors(stats: list[StageStats], max_fraction: float, min_errors: int, samples: int = 3) -> str:
    """What a user needs to fix a failed step: per stage its error count, top messages, first tracebacks."""
    lines = []
    for s in stats:
        lines.append(
            f"stage {s.stage!r}: {s.errors} errors in {s.docs_in} documents ({s.errors / max(s.docs_in, 1):.0%}); "
            f"the error budget allows {max_fraction:.0%} and at least {min_errors} (error_budget in the config)"
        )
        for message, n in s.errors_seen.messages.most_common(5):
            lines.append(f"    {n:>8} x {message}")
        for sample in s.errors_seen.samples[:samples]:
            lines.append(f"  first error: {sample['type']}: {sample['message']} (document {sample['id']})")
            lines.extend("    " + line for line in sample.get("traceback", "").rstrip().splitlines())
    return "\n".join(lines)


def budget_exceeded(step: str, failed: list[StageStats], errors_file: str, early: str = "") -> ErrorBudgetExceeded:
    """The error that fails ``step``, naming each stage over the budget and its first error."""
    first = "; ".join(
        f"{s.stage}: {s.errors_seen.messages.most_common(1)[0][0]}" for s in failed if s.errors_seen.messages
    )
    return ErrorBudgetExceeded(
        f"step {step} failed: {early}{', '.join(f'{s.stage} ({s.errors} of {s.docs_in} documents)' for s in failed)} "
        f"raised errors past the error budget (first error: {first or 'none recorded'}); see {errors_file}. "
        "Fix the cause and rerun: finished steps and tasks are kept."
    )
