"""Signals mode: compute every stage once, decide many times.

``dataprep run CONFIG --signals`` runs each stage of a config on every document without dropping any
(``AnnotatedStage``): the stage's values and its would-be verdict become columns named by its position
in the config, ``NN_name__reason`` (null: it would keep the document) and ``NN_name__<column>`` for each
column it adds, so two stages of one kind never collide. The plain columns (``lang``, ``quality_score``)
hold the values as later stages saw them, as in a full run. A rewriting stage passes its text on:
``text`` is the text after every rewrite (what later stages' signals were computed on, what a corpus
keeps) and ``original_text`` the text before the first rewrite (null where no stage changed it).
A dedup stage's per-document part (hashes, MinHash signatures) is stored too (``PreparedSignals``), so
its decision can be remade among any set of survivors without the text being shingled again.

``dataprep filter`` replays a config over those columns (``ReplayStage``): a stage whose settings match
the signals run's takes its stored verdict; one whose changed settings only move its decision
(``DocumentStage.decision_fields``) decides again from its stored values; any other change is refused.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import SerializeAsAny

from dataprep.core.runner import conform
from dataprep.core.stage import (
    DROP_REASON,
    DROP_STAGE,
    DocumentStage,
    GlobalStage,
    Stage,
    StageResult,
    mark_dropped,
    with_column,
    with_fields,
)

REASON = "reason"
ORIGINAL_TEXT = "original_text"
SEPARATOR = "__"
# Whole-corpus stages with a signals form: their decision over every document is written as columns
SIGNAL_GLOBALS = ("exact_dedup", "minhash_dedup", "url_dedup", "top_fraction")
DEFERRED = ("tokenize",)  # no decision to record: `dataprep filter` writes the shards
# Settings a stored per-document part depends on: a filter config that changes one is refused
PREPARED_SETTINGS = {
    "exact_dedup": {"normalization", "hash"},
    "minhash_dedup": {"ngram", "char_ngram", "chinese_words", "shingle", "num_perm", "seed"},
}
REFUSED = {
    "paragraph_dedup": "paragraph_dedup has no signals form: it cuts text by a decision over the documents "
    "earlier stages keep, and later stages read the cut text",
}


def prefix(position: int, name: str) -> str:
    """The start of the signal columns of the stage at ``position`` (0-based) in the config."""
    return f"{position:02d}_{name}{SEPARATOR}"


def is_signal_column(name: str) -> bool:
    return SEPARATOR in name or name == ORIGINAL_TEXT


def signals_problems(stages: list[Stage]) -> list[str]:
    """One line per stage that cannot run in signals mode (empty: the config can)."""
    problems = []
    for position, stage in enumerate(stages):
        if stage.name in REFUSED:
            problems.append(f"stages.{position} ({stage.name}): {REFUSED[stage.name]}")
        elif isinstance(stage, GlobalStage) and stage.name not in SIGNAL_GLOBALS + DEFERRED:
            problems.append(f"stages.{position} ({stage.name}): a whole-corpus stage with no signals form")
    return problems


def signal_stages(stages: list[Stage]) -> list[DocumentStage]:
    """The document stages of a signals run's one step: every document stage annotating, and the
    per-document part of each dedup stage stored; the whole-corpus decisions come after it."""
    out: list[DocumentStage] = []
    for position, stage in enumerate(stages):
        if isinstance(stage, DocumentStage):
            out.append(AnnotatedStage(stage=stage, position=position))
        elif getattr(stage, "prepared_schema", None) is not None and stage.name in PREPARED_SETTINGS:
            out.append(PreparedSignals(stage=stage, position=position))
    return out


class AnnotatedStage(DocumentStage):
    """A document stage run on every document: its columns, copies of them under its own prefix, and
    its would-be drop reason; no document leaves."""

    stage: SerializeAsAny[DocumentStage]
    position: int

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.stage.name

    def asset_paths(self) -> list[str]:
        return self.stage.asset_paths()

    def output_schema(self, input_schema: pa.Schema) -> pa.Schema:
        schema = self.stage.output_schema(input_schema)
        p = prefix(self.position, self.stage.name)
        extra = [pa.field(p + f.name, f.type) for f in self.stage.output_fields()] + [pa.field(p + REASON, pa.string())]
        return with_fields(schema, extra + [pa.field(ORIGINAL_TEXT, pa.string())])

    def apply(self, batch: pa.Table) -> StageResult:
        schema = self.output_schema(batch.schema)
        if batch.num_rows == 0:
            return StageResult(schema.empty_table(), mark_dropped(schema.empty_table(), self.name, []))
        out, reasons = self._verdicts(batch)
        p = prefix(self.position, self.stage.name)
        for f in self.stage.output_fields():
            out = with_column(out, p + f.name, out.column(f.name))
        out = with_column(out, p + REASON, reasons, pa.string())
        out = conform(with_column(out, ORIGINAL_TEXT, _original(batch, out), pa.string()), schema)
        for reason in reasons:
            if reason is not None:
                self.count(f"would_drop:{reason}")
        self._counters.update(self.stage.take_counters())
        self._errors.merge(self.stage.take_errors())
        self._notes.update(self.stage.take_notes())
        return StageResult(out, mark_dropped(out.slice(0, 0), self.name, []))

    def _verdicts(self, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
        """The stage's output and reasons for every row: as ``DocumentStage.apply`` decides them (a row
        that makes the stage raise gets ``error:<Exception>``), in the batch's order."""
        schema = self.stage.output_schema(batch.schema)
        try:
            out, reasons = self.stage.process(batch)
        except Exception:  # noqa: BLE001 - isolate the offending documents, as apply does
            self.stage.take_counters()  # the retry counts again
            rows, reasons = [], []
            for i in range(batch.num_rows):
                result = self.stage.apply(batch.slice(i, 1))
                if result.kept.num_rows:
                    rows.append(conform(result.kept, schema))
                    reasons.append(None)
                else:
                    rows.append(conform(result.dropped.drop_columns([DROP_STAGE, DROP_REASON]), schema))
                    reasons.append(result.dropped.column(DROP_REASON)[0].as_py())
            return pa.concat_tables(rows), reasons
        if out.num_rows != batch.num_rows or len(reasons) != batch.num_rows:
            raise RuntimeError(
                f"stage {self.name!r} returned {out.num_rows} rows and {len(reasons)} reasons for {batch.num_rows}"
            )
        self.stage._check_columns(batch.schema, out.schema)
        return conform(out, schema), list(reasons)


def _original(before: pa.Table, after: pa.Table) -> pa.Array:
    """``original_text`` after a stage: as it was, or the text before this stage where the stage
    changed a text that existed (extraction makes a text; it does not rewrite one)."""
    earlier = (
        before.column(ORIGINAL_TEXT) if ORIGINAL_TEXT in before.column_names else pa.nulls(before.num_rows, pa.string())
    )
    if "text" not in before.column_names or "text" not in after.column_names:
        return earlier
    old, new = before.column("text"), after.column("text")
    changed = pc.fill_null(pc.not_equal(old, new), False)
    return pc.coalesce(earlier, pc.if_else(changed, old, pa.nulls(before.num_rows, pa.string())))


class PreparedSignals(DocumentStage):
    """A dedup stage's per-document part (``GlobalStage.prepare``: a text hash, a MinHash signature),
    stored as columns under the stage's prefix where the stage stands in the config."""

    stage: SerializeAsAny[GlobalStage]
    position: int

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.stage.name

    def columns(self) -> list[pa.Field]:
        return [f for f in self.stage.prepared_schema if f.name != "id"]

    def output_schema(self, input_schema: pa.Schema) -> pa.Schema:
        p = prefix(self.position, self.stage.name)
        return with_fields(input_schema, [pa.field(p + f.name, f.type) for f in self.columns()])

    def apply(self, batch: pa.Table) -> StageResult:
        schema = self.output_schema(batch.schema)
        rows = (
            self.stage.prepare(batch.select(["id", "text"]))
            if batch.num_rows
            else self.stage.prepared_schema.empty_table()
        )
        where = pc.index_in(batch.column("id"), value_set=rows.column("id"))
        p = prefix(self.position, self.stage.name)
        for f in self.columns():
            batch = with_column(batch, p + f.name, rows.column(f.name).take(where))
        out = conform(batch, schema)
        return StageResult(out, mark_dropped(out.slice(0, 0), self.name, []))


# ---------------------------------------------------------------------------------------------
# Filter: a config replayed over stored signals


class ReplayStage(DocumentStage):
    """A document stage decided from its stored signals: its columns set from its own stored copies,
    and its stored verdict, or (``redecide``) its verdict from those values under its current settings."""

    stage: SerializeAsAny[DocumentStage]
    position: int
    redecide: bool = False

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.stage.name

    def output_schema(self, input_schema: pa.Schema) -> pa.Schema:
        return with_fields(input_schema, self.stage.output_fields())

    def process(self, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
        p = prefix(self.position, self.stage.name)
        for f in self.stage.output_fields():
            batch = with_column(batch, f.name, batch.column(p + f.name).cast(f.type))
        if self.redecide:
            return batch, self.stage.reasons_from_signals(batch)
        return batch, batch.column(p + REASON).to_pylist()


class WhereStage(DocumentStage):
    """``dataprep filter --where``: drops the documents for which an expression over the signals is not
    true; which those are is decided by Spark before the tasks run and set per task (``failing``)."""

    expressions: list[str]
    failing: Any = None  # set of ids, per task

    @property
    def name(self) -> str:  # type: ignore[override]
        return "where"

    def process(self, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
        failing = self.failing or set()
        reason = "where:" + " and ".join(f"({e})" for e in self.expressions)
        return batch, [reason if i in failing else None for i in batch.column("id").to_pylist()]


def replay_plan(recorded: list[dict], stages: list[Stage]) -> tuple[list[Stage], list[str]]:
    """The stages a filter runs for config ``stages`` over a signals run that recorded ``recorded``
    (name and settings per position), and one line per stage that cannot be decided from the signals."""
    problems: list[str] = []
    if [r["name"] for r in recorded] != [s.name for s in stages]:
        names = ([s.name for s in stages], [r["name"] for r in recorded])
        return [], [
            f"the config's stages {names[0]} are not the signals run's {names[1]}: filter needs the same "
            "stages in the same order"
        ]
    plan: list[Stage] = []
    for position, (record, stage) in enumerate(zip(recorded, stages)):
        changed = {k for k, v in stage.model_dump(mode="json").items() if record["params"].get(k) != v}
        where = f"stages.{position} ({stage.name})"
        if isinstance(stage, DocumentStage):
            if changed - set(stage.decision_fields):
                problems.append(
                    f"{where}: {', '.join(sorted(changed))} changed since the signals run, and "
                    f"{', '.join(sorted(changed - set(stage.decision_fields)))} cannot be re-decided from "
                    "stored signals: "
                    "run --signals with these settings"
                )
            plan.append(ReplayStage(stage=stage, position=position, redecide=bool(changed)))
            continue
        if changed & PREPARED_SETTINGS.get(stage.name, set()):
            problems.append(
                f"{where}: {', '.join(sorted(changed & PREPARED_SETTINGS[stage.name]))} changed since the signals run, "
                "and the stored hashes or signatures were made with the old value: run --signals with these settings"
            )
        plan.append(stage)
    return plan, problems
