"""Marking one task's duplicates from the clusters a dedup stage found over the whole corpus.

The cluster rows name only the documents of clusters of two or more: ``id``, the cluster (the id of the
document kept for it), its size, and optionally DUPLICATE (set where a document's cluster is not its
own id for another reason: its cluster's kept document is in a saved index). Every other document is a
cluster of one: its own cluster, size 1, kept.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from dataprep.core.applier import Applier
from dataprep.core.stage import with_column
from dataprep.dedup.weights import WEIGHT, weights_for

# Cluster rows may carry this boolean column: the document is a duplicate (else: its cluster is not its id).
DUPLICATE = "_duplicate"


class MarkDuplicates(Applier):
    """Sets the cluster columns of each document and drops every duplicate with ``reason``; with
    ``weights`` (size ranges, ``dedup.weights``) also the sampling weight of each kept document."""

    def __init__(self, stage: str, reason: str, cluster: str, size: str, weights: list | None = None):
        super().__init__(stage)
        self.reason, self.cluster, self.size, self.weights = reason, cluster, size, weights
        self.clusters: pa.Table | None = None

    def output_fields(self, input_schema: pa.Schema) -> list[pa.Field]:
        fields = [pa.field(self.cluster, pa.string()), pa.field(self.size, pa.int64())]
        return fields + ([pa.field(WEIGHT, pa.float64())] if self.weights is not None else [])

    def begin(self, key: str, decisions: pa.Table | None) -> None:
        self.clusters = decisions

    def process(self, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
        ids = batch.column("id")
        if self.clusters is None or self.clusters.num_rows == 0:
            cluster, size, duplicate = ids, pa.array([1] * batch.num_rows, pa.int64()), [False] * batch.num_rows
        else:
            row = pc.index_in(ids, value_set=self.clusters.column("id"))
            cluster = pc.coalesce(self.clusters.column(self.cluster).take(row), ids)
            size = pc.coalesce(self.clusters.column(self.size).take(row), pa.scalar(1, pa.int64()))
            if DUPLICATE in self.clusters.column_names:
                duplicate = pc.fill_null(self.clusters.column(DUPLICATE).take(row), False).to_pylist()
            else:
                duplicate = pc.not_equal(cluster, ids).to_pylist()
        table = with_column(with_column(batch, self.cluster, cluster, pa.string()), self.size, size, pa.int64())
        if self.weights is not None:
            table = with_column(table, WEIGHT, weights_for(size.to_pylist(), self.weights), pa.float64())
        return table, [self.reason if d else None for d in duplicate]
