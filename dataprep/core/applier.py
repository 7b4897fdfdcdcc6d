"""The per-task half of a whole-corpus stage.

A whole-corpus stage (dedup, tokenize, top_fraction) first decides something that needs every document
(duplicate clusters, score cut-offs, a tokenizer); each task then applies that decision to its own part
of the corpus: marks its duplicates, cuts its repeated paragraphs, encodes its documents into its own
shards. Splitting the two lets a pipeline keep the tasks that finished when a run dies in the second
half, as it does for document stages. An ``Applier`` is that second half; ``apply_task`` is the one
order every runner calls it in; ``dataprep.core.runner.AppliedStage`` runs it where document stages
run, so it gets their stats, progress and error budget.
"""

from __future__ import annotations

from typing import Callable, Generator, Iterable, Iterator

import pyarrow as pa


class Applier:
    """Applies a whole-corpus decision to one task's documents, batch by batch."""

    def __init__(self, stage_name: str):
        self.stage_name = stage_name  # the whole-corpus stage's name, which its counts and drop reasons carry

    def output_fields(self, input_schema: pa.Schema) -> list[pa.Field]:
        """The columns ``process`` adds or replaces."""
        return []

    def begin(self, key: str, decisions: pa.Table | None) -> None:
        """Start task ``key``, once, before its first batch (``apply_task``); ``decisions``: the decision rows
        of all its documents (keyed by ``id``), None when none of them has one."""

    def process(self, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
        """The batch (same rows, same order) with the decision applied, and per row a drop reason or None."""
        raise NotImplementedError

    def finish(self) -> dict:
        """End the task, once, after its last batch; what it returns (e.g. the shards it wrote) is saved in the
        task's completion marker."""
        return {}


def apply_task(
    applier: Applier,
    key: str,
    decisions: pa.Table | None,
    batches: Iterable[pa.Table],
    run: Callable[[Iterable[pa.Table]], Iterator] | None = None,
) -> Generator:
    """One task of a whole-corpus stage, the way every runner applies a decision: ``begin`` once with the
    decision rows of all the task's documents, every batch in order, ``finish`` once. Yields per batch
    ``(output, reasons)`` of ``Applier.process``, or what ``run(batches)`` yields when a runner processes
    them itself (a pipeline step, through its ``dataprep.core.runner.AppliedStage``); returns what ``finish``
    returned."""
    applier.begin(key, decisions)
    yield from (run(batches) if run is not None else (processed(applier, batch) for batch in batches))
    return applier.finish() or {}


def run_task(task: Generator) -> tuple[list, dict]:
    """Everything a task (``apply_task``) yields, and what it returns."""
    items = []
    while True:
        try:
            items.append(next(task))
        except StopIteration as end:
            return items, end.value


def processed(applier: Applier, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
    """``applier.process(batch)``, checked to return one row and one reason per row of the batch."""
    out, reasons = applier.process(batch)
    if out.num_rows != batch.num_rows or len(reasons) != batch.num_rows:
        raise RuntimeError(
            f"{applier.stage_name}: the applier returned {out.num_rows} rows and {len(reasons)} reasons "
            f"for {batch.num_rows}"
        )
    return out, reasons
