"""The per-task half of a whole-corpus stage.

A whole-corpus stage (dedup, tokenize, top_fraction) first decides something that needs every document
(duplicate clusters, score cut-offs, a tokenizer); each task then applies that decision to its own part
of the corpus: marks its duplicates, cuts its repeated paragraphs, encodes its documents into its own
shards. Splitting the two lets a pipeline keep the tasks that finished when a run dies in the second
half, as it does for document stages. An ``Applier`` is that second half; ``AppliedStage`` runs it
where document stages run, so it gets their stats, progress and error budget.
"""

from __future__ import annotations

import pyarrow as pa

from dataprep.core.stage import DocumentStage, StageResult, split_by_reason, with_fields


class Applier:
    """Applies a whole-corpus decision to one task's documents, batch by batch."""

    def __init__(self, stage_name: str):
        self.stage_name = stage_name  # the whole-corpus stage's name, which its counts and drop reasons carry

    def output_fields(self, input_schema: pa.Schema) -> list[pa.Field]:
        """The columns ``process`` adds or replaces."""
        return []

    def begin(self, key: str, decisions: pa.Table | None) -> None:
        (
            """Start task ``key``; ``decisions``: the decision rows of its documents (keyed by ``id``), if the """
            """stage has any."""
        )

    def process(self, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
        """The batch (same rows, same order) with the decision applied, and per row a drop reason or None."""
        raise NotImplementedError

    def finish(self) -> dict:
        """End the task; what it returns (e.g. the shards it wrote) is saved in the task's completion marker."""
        return {}


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
        out, reasons = self.process(batch)
        if out.num_rows != batch.num_rows or len(reasons) != batch.num_rows:
            raise RuntimeError(
                f"{self.name}: the applier returned {out.num_rows} rows and {len(reasons)} reasons for {batch.num_rows}"
            )
        return split_by_reason(out, reasons, self.name)
