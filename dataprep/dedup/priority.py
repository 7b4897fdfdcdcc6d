"""Which copy of a duplicate cluster a dedup stage keeps when the corpus mixes sources (Zyda-2's way):
the copy whose ``source_kind`` comes first in the stage's ``priority`` list (kinds the list does not name
come after those it does; a row without one is web), the smallest id among equals. Without a list the
smallest id is kept, as always. Each removal is counted by the pair of sources it concerns
(``cross_source:REMOVED->KEPT``), for stats.json and the report. Spark's form: ``pipelines.decisions.source_priority``.
"""

from __future__ import annotations

from collections import Counter

import pyarrow as pa

from dataprep.core.stage import WEB

PAIR = "cross_source:"  # counter prefix: cross_source:<kind of the copy removed>-><kind of the copy kept>


def rank_of(kind: str | None, priority: list[str]) -> int:
    kind = kind or WEB
    return priority.index(kind) if kind in priority else len(priority)


def kinds_of(documents: pa.Table) -> dict[str, str]:
    """id -> source kind of each document (web where the column is missing or null)."""
    ids = documents.column("id").to_pylist()
    if "source_kind" not in documents.column_names:
        return dict.fromkeys(ids, WEB)
    return {i: k or WEB for i, k in zip(ids, documents.column("source_kind").to_pylist())}


def prioritize(clusters: pa.Table, documents: pa.Table, priority: list[str], cluster: str) -> pa.Table:
    """Cluster rows (``dataprep.dedup.marks``) with each cluster's kept copy (its ``cluster`` value)
    chosen by ``priority``."""
    kinds = kinds_of(documents)
    ids, roots = clusters.column("id").to_pylist(), clusters.column(cluster).to_pylist()
    best: dict[str, tuple[int, str]] = {}
    for doc, root in zip(ids, roots):
        key = (rank_of(kinds.get(doc), priority), doc)
        if root not in best or key < best[root]:
            best[root] = key
    kept = pa.array([best[root][1] for root in roots], pa.string())
    return clusters.set_column(clusters.column_names.index(cluster), cluster, kept)


def pair_counts(clusters: pa.Table, documents: pa.Table, cluster: str) -> Counter:
    """Removals per (removed kind, kept kind)."""
    kinds = kinds_of(documents)
    pairs = Counter()
    for doc, root in zip(clusters.column("id").to_pylist(), clusters.column(cluster).to_pylist()):
        if doc != root:
            pairs[f"{PAIR}{kinds.get(doc, WEB)}->{kinds.get(root, WEB)}"] += 1
    return pairs
