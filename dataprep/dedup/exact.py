"""Exact deduplication: documents whose normalized text hashes alike form a group; the smallest ``id``
of each group is kept, the others are dropped as ``exact_duplicate``.

Columns added to every row: ``exact_cluster`` (the id kept for the group) and ``exact_cluster_size``
(documents in the group; 1 for a unique text).

One definition, run by both runners (``dataprep.core.stage.GlobalStage``): ``prepare`` hashes each
document, ``decide`` groups the hashes (its Spark form, ``pipelines.decisions.exact_dedup``, is the same
rule as a window over the hash: smallest id and count per group; tests/dataprep/dedup/test_dedup.py
checks that both keep the same documents), ``applier`` marks and drops the duplicates.
"""

from __future__ import annotations

import hashlib
from typing import ClassVar, Literal

import pyarrow as pa
import pyarrow.compute as pc
import xxhash
from pydantic import Field

from dataprep.core.errors import UsageError
from dataprep.core.registry import register
from dataprep.dedup.index import NORMALIZER, IndexedStage
from dataprep.dedup.marks import MarkDuplicates
from dataprep.dedup.normalize import Normalization, normalize_many

REASON = "exact_duplicate"
CLUSTER = "exact_cluster"
CLUSTER_SIZE = "exact_cluster_size"

_HASHES = {
    "xxh64": lambda b: xxhash.xxh64_digest(b),
    "xxh128": lambda b: xxhash.xxh3_128_digest(b),
    "sha1": lambda b: hashlib.sha1(b).digest(),
}


@register("exact_dedup")
class ExactDedup(IndexedStage):
    """Remove documents whose text is identical after normalization (default: lowercase, whitespace
    collapsed). xxh128 is the default hash: at a billion documents a 64-bit hash is likely to merge
    two different texts somewhere, a 128-bit one is not."""

    normalization: Normalization = "lower"
    hash: Literal["xxh128", "xxh64", "sha1"] = "xxh128"
    write_clusters: bool = Field(False, description="Spark: write id -> group for groups of 2+ under the step dir")

    prepared_schema: ClassVar[pa.Schema] = pa.schema([("id", pa.string()), ("hash", pa.binary())])

    def index_config(self) -> dict:
        return {"stage": self.name, "normalization": self.normalization, "hash": self.hash, "normalizer": NORMALIZER}

    def text_hashes(self, texts: list[str | None]) -> list[bytes]:
        """Digest of each normalized text (missing text counts as empty)."""
        digest = _HASHES[self.hash]
        return [digest(t.encode("utf-8", "surrogatepass")) for t in normalize_many(texts, self.normalization)]

    def prepare(self, documents: pa.Table) -> pa.Table:
        """Each document's id and normalized-text digest."""
        hashes = pa.array(self.text_hashes(documents.column("text").to_pylist()), pa.binary())
        return pa.table([documents.column("id"), hashes], schema=self.prepared_schema)

    def decide(self, prepared: pa.Table, documents: pa.Table) -> tuple[pa.Table, dict]:
        """Cluster rows (``dataprep.dedup.marks``) of the texts shared by 2+ documents: the group's
        smallest id is kept."""
        self.check_local()
        if prepared.column("id").null_count:
            raise UsageError("exact_dedup: every document needs a non-null id")
        groups = prepared.group_by("hash").aggregate([("id", "min"), ("id", "count")])
        groups = groups.filter(pc.greater(groups.column("id_count"), 1))
        rows = prepared.join(groups, "hash", join_type="inner")
        clusters = pa.table(
            {
                "id": rows.column("id"),
                CLUSTER: rows.column("id_min"),
                CLUSTER_SIZE: rows.column("id_count").cast(pa.int64()),
            }
        )
        return self.by_priority(clusters, documents, CLUSTER), {}

    def applier(self, state: dict) -> MarkDuplicates:
        return MarkDuplicates(self.name, REASON, CLUSTER, CLUSTER_SIZE)
