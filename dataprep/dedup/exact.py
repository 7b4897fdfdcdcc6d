"""Exact deduplication: documents whose normalized text hashes alike form a group; the smallest ``id``
of each group is kept, the others are dropped as ``exact_duplicate``.

Columns added to every row: ``exact_cluster`` (the id kept for the group) and ``exact_cluster_size``
(documents in the group; 1 for a unique text). The Spark side holds its runner.
"""

from __future__ import annotations

import hashlib
from typing import Literal

import pyarrow as pa
import xxhash
from pydantic import Field

from dataprep.dedup.index import NORMALIZER, IndexedStage
from dataprep.dedup.normalize import Normalization, normalize_many
from dataprep.core.registry import register
from dataprep.core.stage import StageResult, split_by_reason, with_column

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

    def index_config(self) -> dict:
        return {"stage": self.name, "normalization": self.normalization, "hash": self.hash, "normalizer": NORMALIZER}

    def text_hashes(self, texts: list[str | None]) -> list[bytes]:
        """Digest of each normalized text (missing text counts as empty)."""
        digest = _HASHES[self.hash]
        return [digest(t.encode("utf-8", "surrogatepass")) for t in normalize_many(texts, self.normalization)]

    def run_local(self, table: pa.Table) -> StageResult:
        self.check_local()
        ids = table.column("id").to_pylist()
        if any(i is None for i in ids):
            raise ValueError("exact_dedup: every document needs a non-null id")
        groups: dict[bytes, list[int]] = {}
        for row, h in enumerate(self.text_hashes(table.column("text").to_pylist())):
            groups.setdefault(h, []).append(row)
        keep_id = [""] * len(ids)
        size = [0] * len(ids)
        for rows in groups.values():
            kept = min(ids[r] for r in rows)
            for r in rows:
                keep_id[r], size[r] = kept, len(rows)
        table = table.drop_columns([c for c in (CLUSTER, CLUSTER_SIZE) if c in table.column_names])
        table = with_column(table, CLUSTER, keep_id, pa.string())
        table = with_column(table, CLUSTER_SIZE, size, pa.int64())
        reasons = [None if ids[r] == keep_id[r] else REASON for r in range(len(ids))]
        return split_by_reason(table, reasons, self.name)
