"""The Spark decision of ``minhash_dedup`` (``dataprep.dedup.minhash``): the stage's own signatures,
candidate edges from shared LSH bands, verification, and connected components.

Everything stays distributed: signatures come from the stage code through ``mapInArrow``; grouping,
candidate edges, verification and connected components are DataFrame operations, so neither edges nor
signatures are ever collected on the driver. Results are deterministic: the kept document of a group is
its smallest ``id``, whatever the partitioning (or, with a ``priority`` list, the copy of the
best-ranked source: ``pipelines.decisions.source_priority``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.window import Window

from dataprep.dedup import minhash
from dataprep.dedup.index import EARLIER
from dataprep.dedup.marks import DUPLICATE
from dataprep.dedup.minhash import MinHashDedup, component_roots
from pipelines.decisions.shared import (
    BROADCAST_ROWS,
    earlier_entries,
    materialize,
    prepared_rows,
    resolve_earlier,
    save_index,
    write_clusters,
)
from pipelines.decisions.source_priority import prioritized
from pipelines.progress import timed

# Safety stop for connected components; large-star/small-star needs O(log^2 n) rounds, far fewer here.
MAX_ROUNDS = 100
# Up to this many edges, components are found by union-find in one executor task (~100 B per edge):
# seconds instead of a dozen shuffle rounds. Larger graphs use the distributed star iterations.
SINGLE_TASK_MAX_EDGES = 2_000_000
# Band entries (key, id) grouped by one task at most: bounds a Python worker's memory (~200 B an
# entry at its peak), whatever the corpus size.
ENTRIES_PER_TASK = 250_000


def signatures(df: DataFrame, stage: MinHashDedup) -> DataFrame:
    """(id, sig array<int>, keys array<bigint>) for every document that has shingles."""
    return prepared_rows(df, stage.prepare, stage.prepared_schema)


def candidate_edges(sigs: DataFrame, documents: int, bands: int) -> DataFrame:
    """(src, dst) pairs sharing a band bucket (``minhash.bucket_edges``). Band entries travel as a few
    large rows per input batch and part of the key space (array columns), not one row per entry, and
    each part is grouped by pyarrow in one task: 14 entries a document would otherwise be 14 rows
    through a JVM sort. Tasks hold at most ~ENTRIES_PER_TASK entries, however large the corpus."""
    tasks = max(sigs.sparkSession.sparkContext.defaultParallelism, -(-documents * bands // ENTRIES_PER_TASK))
    parts = 4 * tasks  # several parts per task evens out the hash partitioning of parts to tasks

    def route(batches):
        for rb in batches:
            keys = rb.column("keys")
            flat = keys.flatten().to_numpy()
            part = (flat.view(np.uint64) % np.uint64(parts)).astype(np.int32)
            order = np.argsort(part, kind="stable")
            owners = pc.list_parent_indices(keys).to_numpy()[order]
            offsets = np.searchsorted(part[order], np.arange(parts + 1)).astype(np.int32)
            present = np.flatnonzero(np.diff(offsets))
            ends = pa.array(np.append(offsets[present], offsets[-1]))
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array(present, pa.int32()),
                    pa.ListArray.from_arrays(ends, flat[order]),
                    pa.ListArray.from_arrays(ends, rb.column("id").take(owners)),
                ],
                names=["part", "keys", "ids"],
            )

    def group(batches):
        batches = list(batches)
        if batches:
            keys = pa.chunked_array([rb.column("keys").flatten() for rb in batches], pa.int64())
            ids = pa.chunked_array([rb.column("ids").flatten() for rb in batches], pa.string())
            yield from minhash.bucket_edges(keys, ids).to_batches()

    routed = sigs.select("id", "keys").mapInArrow(timed(route), "part int, keys array<bigint>, ids array<string>")
    return routed.repartition(tasks, "part").mapInArrow(timed(group), "src string, dst string").distinct()


def _nodes(edges: DataFrame) -> DataFrame:
    """The ids at either end of ``edges``, materialized; marked for broadcast while there are at most
    BROADCAST_ROWS, so semi-joining a table with them reads the table without shuffling it."""
    ids = materialize(edges.select(F.col("src").alias("id")).union(edges.select(F.col("dst").alias("id"))).distinct())
    return F.broadcast(ids) if ids.count() <= BROADCAST_ROWS else ids


def _with_ends(edges: DataFrame, rows: DataFrame, column: str) -> DataFrame:
    """``edges`` with ``column`` of ``rows`` (id, column) for src and dst, as ``a`` and ``b``."""
    edges = edges.join(rows.select(F.col("id").alias("src"), F.col(column).alias("a")), "src")
    return edges.join(rows.select(F.col("id").alias("dst"), F.col(column).alias("b")), "dst")


def verified_edges(edges: DataFrame, sigs: DataFrame, docs: DataFrame, stage: MinHashDedup) -> DataFrame:
    """The candidate edges that pass ``stage.verify`` (signature or exact; see dataprep.dedup.minhash):
    equal signature positions are counted in the JVM; true Jaccard only where they leave doubt."""
    edges = materialize(edges)
    scored = _with_ends(edges, sigs.join(_nodes(edges), "id", "left_semi"), "sig")
    equal = F.aggregate(F.zip_with("a", "b", lambda x, y: (x == y).cast("int")), F.lit(0), lambda acc, v: acc + v)
    scored = scored.select("src", "dst", equal.alias("matches"))
    if stage.verify == "signature":
        return scored.where(F.col("matches") >= stage.min_matches).select("src", "dst")
    low, high = stage.signature_bounds()
    scored = materialize(scored)
    earlier = F.col("src").startswith(EARLIER) | F.col("dst").startswith(EARLIER)  # no text: signatures decide
    sure = scored.where((F.col("matches") >= high) | (earlier & (F.col("matches") >= stage.min_matches))).select(
        "src", "dst"
    )
    doubt = scored.where((F.col("matches") >= low) & (F.col("matches") < high) & ~earlier).select("src", "dst")
    return sure.union(exactly_verified_edges(doubt, docs, stage))


def exactly_verified_edges(edges: DataFrame, docs: DataFrame, stage: MinHashDedup) -> DataFrame:
    """Keep edges whose two texts' shingle sets have true Jaccard >= threshold. Only the texts of
    documents that have an edge are hashed again; the sets (not the texts) are joined to the edges."""

    def shingle_sets(batches):
        for rb in batches:
            yield stage.shingle_set_batch(rb.column("id").to_pylist(), rb.column("text").to_pylist())

    texts = docs.select("id", "text").join(_nodes(edges), "id", "left_semi")
    sets = materialize(texts.mapInArrow(timed(shingle_sets), "id string, shingles array<int>"))  # joined twice
    pairs = _with_ends(edges, sets, "shingles")
    common = F.size(F.array_intersect("a", "b"))
    similarity = common / (F.size("a") + F.size("b") - common)  # the same division as minhash.jaccard
    return pairs.where(similarity >= stage.threshold).select("src", "dst")


def _large_star(edges: DataFrame) -> DataFrame:
    """Link every neighbour larger than a node to the smallest node of that node's neighbourhood."""
    both = edges.union(edges.select(F.col("dst").alias("src"), F.col("src").alias("dst")))
    low = F.least(F.col("src"), F.min("dst").over(Window.partitionBy("src")))
    out = both.select("src", "dst", low.alias("low")).where(F.col("dst") > F.col("src"))
    return out.select(F.col("dst").alias("src"), F.col("low").alias("dst"))


def _small_star(edges: DataFrame) -> DataFrame:
    """Link every node and its smaller neighbours to the smallest of them (duplicates removed)."""
    down = edges.select(F.greatest("src", "dst").alias("src"), F.least("src", "dst").alias("dst"))
    down = down.select("src", "dst", F.min("dst").over(Window.partitionBy("src")).alias("low"))
    spokes = down.where(F.col("dst") != F.col("low")).select(F.col("dst").alias("src"), F.col("low").alias("dst"))
    return spokes.union(down.select("src", F.col("low").alias("dst"))).distinct()


def _single_task_components(edges: DataFrame) -> DataFrame:
    def roots(batches):
        batches = list(batches)
        src = pa.chunked_array([rb.column("src") for rb in batches], pa.string())
        dst = pa.chunked_array([rb.column("dst") for rb in batches], pa.string())
        ids, found = component_roots(src, dst)
        yield pa.RecordBatch.from_arrays([ids, found], names=["id", "root"])

    return edges.repartition(1).mapInArrow(timed(roots), "id string, root string")


def connected_components(edges: DataFrame, single_task_max_edges: int = SINGLE_TASK_MAX_EDGES) -> DataFrame:
    """(id, root) for every node of ``edges``, root = smallest id of its component (roots map to
    themselves). Small graphs: union-find in one task. Otherwise alternating large-star / small-star
    (Kiveris et al., 2014) until the edge set stops changing, which leaves each component as a star
    around its smallest id; nothing is held in one place."""
    edges = materialize(edges.select("src", "dst"))
    if edges.count() <= single_task_max_edges:
        return _single_task_components(edges)
    checksum = None
    for _ in range(MAX_ROUNDS):
        edges = materialize(_small_star(_large_star(edges)))
        row = edges.agg(F.count("*").alias("n"), F.bit_xor(F.xxhash64("src", "dst")).alias("x")).first()
        if (row.n, row.x) == checksum:
            break
        checksum = (row.n, row.x)
    else:
        raise RuntimeError(f"connected components did not converge in {MAX_ROUNDS} rounds")
    roots = edges.select(F.col("dst").alias("id"), F.col("dst").alias("root")).distinct()
    return edges.select(F.col("src").alias("id"), F.col("dst").alias("root")).union(roots)


def minhash_clusters(
    df: DataFrame, stage: MinHashDedup, ctx=None, single_task_max_edges: int = SINGLE_TASK_MAX_EDGES
) -> DataFrame:
    """The cluster rows of the documents with near-duplicates (connected components of verified edges);
    the signatures are those the pipeline's tasks saved (``ctx.prepared``) when there are."""
    prepared = getattr(ctx, "prepared", None)
    sigs = prepared if prepared is not None else signatures(df, stage)
    earlier = earlier_entries(df, stage, ["sig", "keys"])
    if earlier is not None:
        sigs = sigs.unionByName(earlier)
    if prepared is None:  # computed here: kept on disk (in memory it would grow with the corpus), read twice
        sigs = sigs.persist(StorageLevel.DISK_ONLY)
    try:
        edges = candidate_edges(sigs, sigs.count(), stage.layout()[0])
        if stage.verify != "none":
            edges = verified_edges(edges, sigs, df, stage)
        members = connected_components(edges, single_task_max_edges)
        size = F.count("*").over(Window.partitionBy("root"))
        clusters = members.select("id", F.col("root").alias(minhash.CLUSTER), size.alias(minhash.CLUSTER_SIZE))
        clusters = materialize(resolve_earlier(prioritized(clusters, df, stage, minhash.CLUSTER), minhash.CLUSTER))
        if stage.save_index:
            save_index(sigs.join(clusters.where(F.col(DUPLICATE)).select("id"), "id", "left_anti"), stage)
    finally:
        sigs.unpersist()
    if stage.write_clusters:
        write_clusters(clusters, ctx, minhash.CLUSTER, minhash.CLUSTER_SIZE)
    return clusters


def decide(df: DataFrame, stage: MinHashDedup, ctx=None) -> tuple[DataFrame, dict]:
    return minhash_clusters(df, stage, ctx), {}
