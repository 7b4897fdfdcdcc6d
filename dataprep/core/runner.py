"""Running document stages in order over batches, without Spark.

The same code runs inside each Spark task and on its own for tests and small inputs (``run_stages``),
so a stage behaves identically in both.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from dataprep.core.applier import Applier, processed
from dataprep.core.stage import (
    DROP_REASON,
    DROP_STAGE,
    DocumentStage,
    GlobalStage,
    Stage,
    StageResult,
    Timer,
    concat,
    split_by_reason,
    with_fields,
)
from dataprep.core.stats import StageStats, merge_all

DROP_FIELDS = [pa.field(DROP_STAGE, pa.string()), pa.field(DROP_REASON, pa.string())]


# ---------------------------------------------------------------------------------------------
# Schemas: mapInArrow needs the output schema before it runs; stages declare theirs


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Reorder/cast ``table`` to ``schema``; columns it lacks (added by later stages) become null."""
    columns = []
    for f in schema:
        if f.name in table.column_names:
            col = table.column(f.name)
            columns.append(col if col.type == f.type else col.cast(f.type))
        else:
            columns.append(pa.nulls(table.num_rows, f.type))
    return pa.Table.from_arrays(columns, schema=schema)


def fused_schema(stages: list[DocumentStage], input_schema: pa.Schema) -> pa.Schema:
    schema = input_schema
    for stage in stages:
        schema = stage.output_schema(schema)
    return pa.schema(list(schema) + DROP_FIELDS)


def blank_text(dropped: pa.Table, keep_text: bool) -> pa.Table:
    if keep_text or "text" not in dropped.column_names or dropped.num_rows == 0:
        return dropped
    drop_cols = [c for c in ("html",) if c in dropped.column_names]
    dropped = dropped.drop_columns(drop_cols)
    i = dropped.column_names.index("text")
    return dropped.set_column(i, "text", pa.nulls(dropped.num_rows, pa.string()))


def run_fused(
    batches: Iterator[pa.Table],
    stages: list[DocumentStage],
    stats: list[StageStats],
    schema: pa.Schema,
    keep_dropped_text: bool,
) -> Iterator[pa.Table]:
    """Push each batch through the stages in order; yield kept and dropped rows in ``schema``."""
    timed = set()  # stages whose first batch (where lists and models load) was recorded
    for batch in batches:
        for stage, stage_stats in zip(stages, stats):
            if batch.num_rows == 0:
                break
            with Timer() as t:
                result = stage.apply(batch)
            stage_stats.record(batch, result, t.seconds, cpu_seconds=t.cpu_seconds, first_batch=stage.name not in timed)
            timed.add(stage.name)
            stage_stats.record_counters(stage)
            if result.dropped.num_rows:
                yield conform(blank_text(result.dropped, keep_dropped_text), schema)
            batch = result.kept
        if batch.num_rows:
            yield conform(batch, schema)


def run_stages(
    stages: list[Stage], table: pa.Table, keep_dropped_text: bool = True
) -> tuple[StageResult, list[StageStats]]:
    """Run a whole stage list in memory: document stages batch-wise, global stages via their ``run_local``.
    Returns the kept documents, all dropped ones (with stage and reason), and per-stage stats."""
    kept, dropped, all_stats = table, [], []
    i = 0
    while i < len(stages):
        if isinstance(stages[i], GlobalStage):
            stage = stages[i]
            with Timer() as t:
                result = stage.run_local(kept)
            s = StageStats(stage.name)
            s.record(kept, result, t.seconds, cpu_seconds=t.cpu_seconds)
            s.record_counters(stage)
            all_stats.append(s)
            dropped.append(result.dropped)
            kept = result.kept
            i += 1
            continue
        run = []
        while i < len(stages) and not isinstance(stages[i], GlobalStage):
            run.append(stages[i])
            i += 1
        stats = [StageStats(s.name) for s in run]
        schema = fused_schema(run, kept.schema)
        out = concat(run_fused(iter([kept]), run, stats, schema, keep_dropped_text))
        if out.num_rows == 0:
            out = schema.empty_table()
        is_kept = out.column(DROP_REASON).is_null()
        kept = out.filter(is_kept).drop_columns([DROP_STAGE, DROP_REASON])
        dropped.append(out.filter(pc.invert(is_kept)))
        all_stats.extend(stats)
    return StageResult(kept, concat(d for d in dropped if d.num_rows)), merge_all(all_stats)


class AppliedStage(DocumentStage):
    """An ``Applier`` as a document stage, named after its whole-corpus stage. Unlike a document stage,
    a failing batch fails the task (no document-by-document retry): an applier's errors are not the
    documents' fault, and a retry would apply side effects such as shard writes twice."""

    applier: Applier

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.applier.stage_name

    def output_schema(self, input_schema: pa.Schema) -> pa.Schema:
        return with_fields(input_schema, self.applier.output_fields(input_schema))

    def process(self, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
        return self.applier.process(batch)

    def apply(self, batch: pa.Table) -> StageResult:
        return split_by_reason(*processed(self.applier, batch), self.name)
