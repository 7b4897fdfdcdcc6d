"""Spark runners for exact, MinHash and URL deduplication (contract: ``pipelines/global_runners.py``).

Everything stays distributed: per-document hashes and signatures come from the stage code through
``mapInArrow``; grouping, candidate edges, verification and connected components are DataFrame
operations, so neither edges nor signatures are ever collected on the driver. Results are
deterministic: the kept document of a group is its smallest ``id``, whatever the partitioning (or, with
a ``priority`` list, the copy of the best-ranked source: ``pipelines.dedup_priority``).

Saved indexes (``dataprep.dedup.index``): the documents of earlier runs join the groups and graphs
with ids prefixed by ``EARLIER``, which sorts first, so a group holding an earlier document has it as
its root and every new member is removed; earlier documents themselves are never output.

Intermediate results are checkpointed to cut lineage: reliably when the session has a checkpoint
directory (``spark.checkpoint.dir``; set it on clusters so a lost executor does not lose the graph),
otherwise locally on the executors.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.window import Window

from dataprep.core.storage import join_path
from dataprep.dedup import exact, minhash, urls
from dataprep.dedup.exact import ExactDedup
from dataprep.dedup.index import DATA, EARLIER, IndexedStage, begin_write, open_index, write_manifest
from dataprep.dedup.marks import DUPLICATE
from dataprep.dedup.minhash import MinHashDedup, component_roots
from dataprep.dedup.urls import UrlDedup
from pipelines.dedup_priority import prioritized
from pipelines.progress import timed
from pipelines.run_folder import check_dataset_folder
from pipelines.steps import PREPARE_COLUMNS

# Safety stop for connected components; large-star/small-star needs O(log^2 n) rounds, far fewer here.
MAX_ROUNDS = 100
# Up to this many edges, components are found by union-find in one executor task (~100 B per edge):
# seconds instead of a dozen shuffle rounds. Larger graphs use the distributed star iterations.
SINGLE_TASK_MAX_EDGES = 2_000_000
# Id lists up to this many rows are broadcast to every task (~50 B a row) instead of shuffling the
# table they filter or annotate (documents with their texts, signatures).
BROADCAST_ROWS = 2_000_000
# Band entries (key, id) grouped by one task at most: bounds a Python worker's memory (~200 B an
# entry at its peak), whatever the corpus size.
ENTRIES_PER_TASK = 250_000


def _materialize(df: DataFrame) -> DataFrame:
    """Compute ``df`` now and cut its lineage (reliable checkpoint when a directory is configured,
    else on the executors' local disk: kept in memory, it would make executors grow with the corpus)."""
    if df.sparkSession.sparkContext.getCheckpointDir():
        return df.checkpoint(eager=True)
    return df.localCheckpoint(eager=True, storageLevel=StorageLevel.DISK_ONLY)


def _rows_of(df: DataFrame, rows, schema: pa.Schema) -> DataFrame:
    """``rows`` (a prepare function: documents' PREPARE_COLUMNS -> a table in ``schema``) over every
    document of ``df``, on Spark: where no prepare task saved them."""

    def batches_of(batches):
        for rb in batches:
            yield from rows(rb).to_batches()

    return df.select(*PREPARE_COLUMNS).mapInArrow(timed(batches_of), from_arrow_schema(schema))


def _earlier(df: DataFrame, stage: IndexedStage, columns: list[str]) -> DataFrame | None:
    """The entries of the indexes ``stage`` loads, ids prefixed with EARLIER (None without indexes).
    Every index is checked (format, configuration, checksums) before anything runs."""
    if not stage.load_indexes:
        return None
    paths = [p for index in stage.load_indexes for p in open_index(index, stage.index_config())]
    entries = df.sparkSession.read.parquet(*paths)
    return entries.select(F.concat(F.lit(EARLIER), F.col("id")).alias("id"), *columns)


def _resolve_earlier(clusters: DataFrame, cluster: str) -> DataFrame:
    """Mark each document whose root is not itself as DUPLICATE; roots from an index lose their
    prefix, and the indexed documents themselves leave (they are not this run's to mark)."""
    earlier = F.col(cluster).startswith(EARLIER)
    clusters = clusters.where(~F.col("id").startswith(EARLIER)).withColumn(DUPLICATE, F.col(cluster) != F.col("id"))
    return clusters.withColumn(
        cluster, F.when(earlier, F.col(cluster).substr(F.lit(2), F.length(cluster))).otherwise(F.col(cluster))
    )


def _save_index(entries: DataFrame, stage: IndexedStage) -> None:
    """Write this run's kept entries (never those loaded from indexes) as a new index."""
    check_dataset_folder(join_path(stage.save_index, DATA))  # Spark replaces it whole
    begin_write(stage.save_index)
    entries = _materialize(entries.where(~F.col("id").startswith(EARLIER)))
    entries.write.mode("overwrite").parquet(join_path(stage.save_index, DATA))
    write_manifest(stage.save_index, stage.index_config(), entries.count())


def _write_clusters(clusters: DataFrame, ctx, cluster: str, size: str) -> None:
    if ctx is not None and getattr(ctx, "step_dir", None):
        clusters.where(F.col(size) > 1).write.mode("overwrite").parquet(ctx.step_dir.rstrip("/") + "/clusters")


# ------------------------------------------------------------------------------------------------
# Exact


def exact_clusters(df: DataFrame, stage: ExactDedup, ctx=None) -> DataFrame:
    """The Spark form of ``ExactDedup.decide`` (the same rule, as a window over the hash): the cluster
    rows of the documents whose normalized text another shares; the hashes are those the pipeline's
    tasks saved (``ctx.prepared``) when there are."""
    prepared = getattr(ctx, "prepared", None)
    hashes = prepared if prepared is not None else _rows_of(df, stage.prepare, stage.prepared_schema)
    earlier = _earlier(df, stage, ["hash"])
    if earlier is not None:
        hashes = hashes.unionByName(earlier)
    group = Window.partitionBy("hash")
    grouped = hashes.select(
        "id",
        "hash",
        F.min("id").over(group).alias(exact.CLUSTER),
        F.count("*").over(group).alias(exact.CLUSTER_SIZE),
    )
    if stage.save_index:
        grouped = _materialize(grouped)
        _save_index(grouped.where(F.col("id") == F.col(exact.CLUSTER)).select("id", "hash"), stage)
    clusters = grouped.where(F.col(exact.CLUSTER_SIZE) > 1).select("id", exact.CLUSTER, exact.CLUSTER_SIZE)
    clusters = _materialize(_resolve_earlier(prioritized(clusters, df, stage, exact.CLUSTER), exact.CLUSTER))
    if stage.write_clusters:
        _write_clusters(clusters, ctx, exact.CLUSTER, exact.CLUSTER_SIZE)
    return clusters


# ------------------------------------------------------------------------------------------------
# URL


def url_clusters(df: DataFrame, stage: UrlDedup, ctx=None) -> DataFrame:
    """The Spark form of ``UrlDedup.decide`` (the same rule, as a window over the URL key): the cluster
    rows of the documents whose normalized URL another shares."""

    def key_batches(batches):
        for rb in batches:
            yield stage.key_batch(*(rb.column(c).to_pylist() for c in ("id", "url", "date", "length")))

    lengths = df.select("id", "url", "date", F.coalesce(F.length("text"), F.lit(0)).cast("long").alias("length"))
    keys = lengths.mapInArrow(timed(key_batches), "id string, url_key string, fetched string, length long")
    same_url = Window.partitionBy("url_key")
    first, second = stage.preference
    best_first = same_url.orderBy(F.desc(first), F.desc(second), F.asc("id"))
    clusters = keys.select(
        "id", F.first("id").over(best_first).alias(urls.CLUSTER), F.count("*").over(same_url).alias(urls.CLUSTER_SIZE)
    ).where(F.col(urls.CLUSTER_SIZE) > 1)
    return _materialize(clusters)


# ------------------------------------------------------------------------------------------------
# MinHash


def signatures(df: DataFrame, stage: MinHashDedup) -> DataFrame:
    """(id, sig array<int>, keys array<bigint>) for every document that has shingles."""
    return _rows_of(df, stage.prepare, stage.prepared_schema)


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
    ids = _materialize(edges.select(F.col("src").alias("id")).union(edges.select(F.col("dst").alias("id"))).distinct())
    return F.broadcast(ids) if ids.count() <= BROADCAST_ROWS else ids


def _with_ends(edges: DataFrame, rows: DataFrame, column: str) -> DataFrame:
    """``edges`` with ``column`` of ``rows`` (id, column) for src and dst, as ``a`` and ``b``."""
    edges = edges.join(rows.select(F.col("id").alias("src"), F.col(column).alias("a")), "src")
    return edges.join(rows.select(F.col("id").alias("dst"), F.col(column).alias("b")), "dst")


def verified_edges(edges: DataFrame, sigs: DataFrame, docs: DataFrame, stage: MinHashDedup) -> DataFrame:
    """The candidate edges that pass ``stage.verify`` (signature or exact; see dataprep.dedup.minhash):
    equal signature positions are counted in the JVM; true Jaccard only where they leave doubt."""
    edges = _materialize(edges)
    scored = _with_ends(edges, sigs.join(_nodes(edges), "id", "left_semi"), "sig")
    equal = F.aggregate(F.zip_with("a", "b", lambda x, y: (x == y).cast("int")), F.lit(0), lambda acc, v: acc + v)
    scored = scored.select("src", "dst", equal.alias("matches"))
    if stage.verify == "signature":
        return scored.where(F.col("matches") >= stage.min_matches).select("src", "dst")
    low, high = stage.signature_bounds()
    scored = _materialize(scored)
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
    sets = _materialize(texts.mapInArrow(timed(shingle_sets), "id string, shingles array<int>"))  # joined twice
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
    edges = _materialize(edges.select("src", "dst"))
    if edges.count() <= single_task_max_edges:
        return _single_task_components(edges)
    checksum = None
    for _ in range(MAX_ROUNDS):
        edges = _materialize(_small_star(_large_star(edges)))
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
    earlier = _earlier(df, stage, ["sig", "keys"])
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
        clusters = _materialize(_resolve_earlier(prioritized(clusters, df, stage, minhash.CLUSTER), minhash.CLUSTER))
        if stage.save_index:
            _save_index(sigs.join(clusters.where(F.col(DUPLICATE)).select("id"), "id", "left_anti"), stage)
    finally:
        sigs.unpersist()
    if stage.write_clusters:
        _write_clusters(clusters, ctx, minhash.CLUSTER, minhash.CLUSTER_SIZE)
    return clusters
