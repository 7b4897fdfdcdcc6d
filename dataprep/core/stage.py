"""The stage model every cleaning step follows.

A stage is a small, pure unit over a batch of documents (a ``pyarrow.Table``). It returns the kept
documents (text possibly rewritten, attribute columns possibly added) and the dropped ones, each with
the stage's name and a reason. Bookkeeping (timing, counting, isolating a document that makes the
stage raise) lives here once, so a stage only says keep or drop and why.

Two kinds:
- ``DocumentStage``: decides per document, batch by batch; Spark fuses consecutive ones per partition.
  It declares the columns it adds (``output_fields``) and removes (``removed_columns``), so the runner
  knows a step's schema without running anything.
- ``GlobalStage``: needs every document at once (dedup, top_fraction, tokenization). It declares its parts
  once: ``prepare`` (rows per document), ``decide`` (the whole-corpus decision), ``applier`` (the per-task
  half that applies it) and an optional ``complete``. ``run_local`` runs them in memory; Spark runs the same
  prepare, applier and complete as tasks, with the Spark form of ``decide`` from ``pipelines.global_runners``.

A stage can count events of its own (``self.count("routed_to_trafilatura")``); they land in stats.json
beside kept and dropped. A document that makes a stage raise is dropped as ``error:<Exception>``; its
message and the first tracebacks go to stats.json too, and the runner fails the step when a stage's
errors exceed the error budget (a broken model must not silently drop a whole corpus). Parameters are
pydantic fields, so a YAML config with an unknown key or a bad value fails before any work starts, with the
key named. ``@register("name")`` (``dataprep.core.registry``)
names a stage for configs.
"""

from __future__ import annotations

import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from typing import ClassVar, Iterable, NamedTuple

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, PrivateAttr

# Columns every document has, in this order; stages append attribute columns after them.
DOC_SCHEMA = pa.schema(
    [
        ("id", pa.string()),  # stable across reruns (from WARC-Record-ID, or a hash of source+offset)
        ("url", pa.string()),
        ("date", pa.string()),  # ISO 8601 as found in the record
        ("source", pa.string()),  # the input file the document came from
        ("text", pa.string()),
    ]
)
# Which kind of source a document came from (the readers' ``source_kind`` column): a row without one is web.
WEB = "web"
DROP_STAGE = "drop_stage"
DROP_REASON = "drop_reason"


class StageResult(NamedTuple):
    kept: pa.Table
    dropped: pa.Table  # the input columns plus DROP_STAGE and DROP_REASON


@dataclass
class ErrorLog:
    """Why documents failed: ``"Type: message"`` -> count, and the first few failures with their
    document id and traceback (sorted by id, so merging partitions in any order gives the same log)."""

    messages: Counter = field(default_factory=Counter)
    samples: list[dict] = field(default_factory=list)
    MAX_SAMPLES: ClassVar[int] = 5
    MAX_MESSAGES: ClassVar[int] = 50  # distinct messages kept; the rest are counted under "(other)"
    MAX_CHARS: ClassVar[int] = 300

    def add(self, exc: BaseException, doc_id: str | None, with_traceback: bool = True) -> None:
        message = " ".join(str(exc).split())[: self.MAX_CHARS]
        key = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
        self._count(key, 1)
        if len(self.samples) < self.MAX_SAMPLES:
            tb = "".join(traceback.format_exception(exc)) if with_traceback else ""
            self.samples.append({"id": doc_id, "type": type(exc).__name__, "message": message, "traceback": tb})

    def _count(self, key: str, n: int) -> None:
        if key not in self.messages and len(self.messages) >= self.MAX_MESSAGES:
            key = "(other)"
        self.messages[key] += n

    def merge(self, other: "ErrorLog") -> "ErrorLog":
        for key, n in other.messages.items():
            self._count(key, n)
        if other.samples:
            both = self.samples + other.samples
            self.samples = sorted(both, key=lambda e: (str(e["id"]), e["type"], e["message"]))[: self.MAX_SAMPLES]
        return self

    def to_dict(self) -> dict:
        if not self.messages:
            return {}
        return {"error_messages": dict(self.messages.most_common()), "error_samples": self.samples}

    @classmethod
    def from_dict(cls, d: dict) -> "ErrorLog":
        return cls(Counter(d.get("error_messages", {})), list(d.get("error_samples", [])))


class Stage(BaseModel):
    """Base of every configurable stage: pydantic fields are its parameters."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    name: ClassVar[str] = ""
    # False for stages that work without the document text (extract makes it, url_filter reads URLs):
    # the config check rejects a text stage before extract on WARC input.
    reads_text: ClassVar[bool] = True
    _counters: Counter = PrivateAttr(default_factory=Counter)
    _errors: ErrorLog = PrivateAttr(default_factory=ErrorLog)
    _notes: dict = PrivateAttr(default_factory=dict)

    def count(self, event: str, n: int = 1) -> None:
        """Count an event of this stage's own (e.g. pages routed to a slower extractor) for stats.json."""
        self._counters[event] += n

    def take_counters(self) -> Counter:
        """The events counted since the last call (the runner adds them to the stage's stats)."""
        counters, self._counters = self._counters, Counter()
        return counters

    def note(self, key: str, value) -> None:
        """Record a value the stage applied (e.g. a score cut-off) for stats.json, as-is (not summed)."""
        self._notes[key] = value

    def take_notes(self) -> dict:
        """The values noted since the last call."""
        notes, self._notes = self._notes, {}
        return notes

    def take_errors(self) -> ErrorLog:
        """The failures logged since the last call."""
        errors, self._errors = self._errors, ErrorLog()
        return errors

    def asset_paths(self) -> list[str]:
        """Local files or folders (models, word lists) the stage reads on executors; the Spark runner
        ships them with the job, and the stage opens them through ``dataprep.core.storage.resolve_asset``."""
        return []

    def place_outputs(self, output_dir: str) -> None:
        """Told the run's output folder before it starts: a stage whose files default to a place inside it
        (the tokenizer it trains) records that place here. The config, and so the step's fingerprint,
        keeps the default, so a moved output folder still resumes."""

    def files_written(self) -> list[str]:
        """The files the stage wrote outside its step's rows (a trained tokenizer, token shards), for the
        run's record: ``--overwrite`` removes what a run wrote and nothing else."""
        return []

    def record_run(self, run: dict) -> None:
        """Told the run's identity (config and input digests, code version, time) before it starts: a stage
        that writes a dataset (tokenize) records it there, for lineage."""

    def check_assets(self) -> None:
        """Load what the stage needs (models, tokenizers) so that a missing or broken file is a config
        error before Spark starts; raise ValueError or FileNotFoundError naming it."""


class DocumentStage(Stage):
    """A stage that decides each document on its own; batches are independent."""

    removed_columns: ClassVar[tuple[str, ...]] = ()  # input columns the stage drops (e.g. raw HTML)
    # Settings that only move the decision over the values the stage adds (a threshold): a filter over
    # stored signals (dataprep.core.signals) decides again with ``reasons_from_signals`` when only these changed.
    decision_fields: ClassVar[tuple[str, ...]] = ()

    def reasons_from_signals(self, batch: pa.Table) -> list[str | None]:
        """Per row, the drop reason under the current settings, from the columns ``process`` added and
        the ``signal_fields`` (under their plain names)."""
        raise NotImplementedError

    def signal_fields(self) -> list[pa.Field]:
        """Values only a signals run stores (a rule's ratio or count, which a full run computes only as far
        as its decision needs): ``signal_values`` computes them, ``reasons_from_signals`` reads them back."""
        return []

    def signal_values(self, batch: pa.Table) -> pa.Table:
        """The ``signal_fields`` columns for each row of ``batch`` (the batch ``process`` is given)."""
        raise NotImplementedError

    def output_fields(self) -> list[pa.Field]:
        """The attribute columns ``process`` adds (or replaces) besides ``text``; override when it adds any."""
        return []

    def output_schema(self, input_schema: pa.Schema) -> pa.Schema:
        """The schema ``process`` returns for ``input_schema``, derived from the declarations above."""
        kept = pa.schema([f for f in input_schema if f.name not in self.removed_columns])
        return with_fields(kept, self.output_fields())

    def process(self, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
        """Return the batch (same rows, same order; text may change, columns may be added) and, per row,
        a drop reason or None to keep. Override this for vectorised work over the batch."""
        raise NotImplementedError

    def apply(self, batch: pa.Table) -> StageResult:
        """Run ``process``; if it raises, retry document by document so one bad document is dropped
        with reason ``error:<Exception>`` instead of failing the whole batch."""
        if batch.num_rows == 0:
            return StageResult(batch, mark_dropped(batch.slice(0, 0), self.name, []))
        try:
            out, reasons = self.process(batch)
        except Exception:  # noqa: BLE001 - isolate the offending documents below
            self._counters.clear()  # the retry counts again
            return self._apply_row_by_row(batch)
        if out.num_rows != batch.num_rows or len(reasons) != batch.num_rows:
            raise RuntimeError(
                f"stage {self.name!r} returned {out.num_rows} rows and {len(reasons)} reasons for {batch.num_rows}"
            )
        self._check_columns(batch.schema, out.schema)
        return split_by_reason(out, reasons, self.name)

    def _check_columns(self, input_schema: pa.Schema, output_schema: pa.Schema) -> None:
        """A column the stage returns but does not declare would be lost on Spark: fail on the first batch."""
        declared = set(self.output_schema(input_schema).names)
        if set(output_schema.names) != declared:
            raise RuntimeError(
                f"stage {self.name!r} returned columns {sorted(output_schema.names)} but declares {sorted(declared)}: "
                "declare added columns in output_fields() and dropped ones in removed_columns"
            )

    def _apply_row_by_row(self, batch: pa.Table) -> StageResult:
        kept, dropped = [], []
        for i in range(batch.num_rows):
            row = batch.slice(i, 1)
            try:
                out, reasons = self.process(row)
                result = split_by_reason(out, reasons, self.name)
            except Exception as exc:  # noqa: BLE001 - counted as an error, never a crash
                doc_id = row.column("id")[0].as_py() if "id" in row.column_names else None
                self._errors.add(exc, doc_id)
                result = StageResult(row.slice(0, 0), mark_dropped(row, self.name, [f"error:{type(exc).__name__}"]))
            kept.append(result.kept)
            dropped.append(result.dropped)
        return StageResult(concat(kept), concat(dropped))


class GlobalStage(Stage):
    """A stage over the whole corpus, declared once in parts that both runners execute:

    - ``prepare(documents) -> rows`` in ``prepared_schema`` (None: no per-document part): what each
      document contributes to the decision (a hash, a signature); Spark runs it as tasks over parts.
    - ``decide(rows, documents) -> (decisions, state)``: the in-memory form of the whole-corpus decision
      (decision rows keyed by ``id``, or None; ``state`` as JSON). Spark runs its own form of the same
      rule where the data is too big for the driver (``pipelines.global_runners``); a test per stage
      checks that both give the same documents.
    - ``applier(state)``: the per-task half (``dataprep.core.applier.Applier``) both runners apply.
    - ``complete(state, finished)``, optional: after every task, with what each task's
      ``Applier.finish`` returned (tokenize writes its manifest from them).

    ``run_local`` is the in-memory runner of these parts: one table, one task."""

    prepared_schema: ClassVar[pa.Schema | None] = None

    def prepare(self, documents: pa.Table) -> pa.Table:
        raise NotImplementedError

    def decide(self, prepared: pa.Table | None, documents: pa.Table) -> tuple[pa.Table | None, dict]:
        raise NotImplementedError

    def applier(self, state: dict):
        raise NotImplementedError

    def complete(self, state: dict, finished: Iterable[dict]) -> None:
        """Nothing to do after the tasks by default."""

    def run_local(self, table: pa.Table) -> StageResult:
        """Prepare every document, decide over all of them, apply the decision: in memory, one task."""
        prepared = self.prepare(table) if self.prepared_schema is not None else None
        decisions, state = self.decide(prepared, table)
        from dataprep.core.applier import apply_task, run_task

        [(out, reasons)], finished = run_task(apply_task(self.applier(state), LOCAL_TASK, decisions, [table]))
        self.complete(state, [finished])
        return split_by_reason(out, reasons, self.name)


LOCAL_TASK = "00000"  # the task key of an in-memory run (names a tokenize run's shards)


# ---------------------------------------------------------------------------------------------
# Table helpers shared by stages and runners


def concat(tables: Iterable[pa.Table]) -> pa.Table:
    tables = [t for t in tables]
    if not tables:
        return pa.table({})
    return pa.concat_tables(tables, promote_options="permissive")


def with_column(table: pa.Table, name: str, values, type_: pa.DataType | None = None) -> pa.Table:
    """Set column ``name`` to ``values`` (a list or an Arrow array), replacing it in place when the table
    has it already (a stage run twice, or an attribute recomputed) and appending it otherwise."""
    array = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values, type_)
    if name in table.column_names:
        return table.set_column(table.column_names.index(name), name, array)
    return table.append_column(name, array)


def with_fields(schema: pa.Schema, fields: list[pa.Field]) -> pa.Schema:
    """``schema`` plus ``fields``, replacing same-named ones in place: the schema twin of ``with_column``."""
    for f in fields:
        i = schema.get_field_index(f.name)
        schema = schema.set(i, f) if i >= 0 else schema.append(f)
    return schema


def mark_dropped(table: pa.Table, stage: str, reasons: list[str]) -> pa.Table:
    """Append DROP_STAGE and DROP_REASON columns to the dropped rows."""
    table = with_column(table, DROP_STAGE, [stage] * table.num_rows, pa.string())
    return with_column(table, DROP_REASON, reasons, pa.string())


def split_by_reason(table: pa.Table, reasons: list[str | None], stage: str) -> StageResult:
    keep_mask = pa.array([r is None for r in reasons], pa.bool_())
    kept = table.filter(keep_mask)
    drop_idx = [i for i, r in enumerate(reasons) if r is not None]
    dropped = mark_dropped(table.take(pa.array(drop_idx, pa.int64())), stage, [reasons[i] for i in drop_idx])
    return StageResult(kept, dropped)


def payload_bytes(table: pa.Table) -> int:
    """Bytes of a document's content: its text plus raw HTML (before extract, the HTML is the content)."""
    return _column_bytes(table, "text") + _column_bytes(table, "html")


def _column_bytes(table: pa.Table, name: str) -> int:
    if name not in table.column_names:
        return 0
    import pyarrow.compute as pc

    total = pc.sum(pc.binary_length(table.column(name))).as_py()
    return int(total or 0)


class Timer:
    """Context manager that adds elapsed seconds to ``self.seconds`` and this process's CPU seconds to
    ``self.cpu_seconds`` (what a cost estimate reads: wall time stretches on a busy machine, CPU does not)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.cpu_seconds = 0.0

    def __enter__(self) -> "Timer":
        self._t0, self._cpu0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds += time.perf_counter() - self._t0
        self.cpu_seconds += time.process_time() - self._cpu0
