"""Spark helpers the whole-corpus decisions share (``pipelines.decisions``): cutting a DataFrame's
lineage, a stage's ``prepare`` over every document, and a dedup stage's saved indexes and clusters.

Saved indexes (``dataprep.dedup.index``): the documents of earlier runs join the groups and graphs
with ids prefixed by ``EARLIER``, which sorts first, so a group holding an earlier document has it as
its root and every new member is removed; earlier documents themselves are never output.

Intermediate results are checkpointed to cut lineage: reliably when the session has a checkpoint
directory (``spark.checkpoint.dir``; set it on clusters so a lost executor does not lose the graph),
otherwise locally on the executors.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from dataprep.core.storage import join_path
from dataprep.dedup.index import DATA, EARLIER, IndexedStage, begin_write, open_index, write_manifest
from dataprep.dedup.marks import DUPLICATE
from pipelines.progress import timed
from pipelines.run_folder import check_dataset_folder
from pipelines.steps import PREPARE_COLUMNS

# Id lists up to this many rows are broadcast to every task (~50 B a row) instead of shuffling the
# table they filter or annotate (documents with their texts, signatures).
BROADCAST_ROWS = 2_000_000


def materialize(df: DataFrame) -> DataFrame:
    """Compute ``df`` now and cut its lineage (reliable checkpoint when a directory is configured,
    else on the executors' local disk: kept in memory, it would make executors grow with the corpus)."""
    if df.sparkSession.sparkContext.getCheckpointDir():
        return df.checkpoint(eager=True)
    return df.localCheckpoint(eager=True, storageLevel=StorageLevel.DISK_ONLY)


def prepared_rows(df: DataFrame, rows, schema: pa.Schema, columns=PREPARE_COLUMNS) -> DataFrame:
    """``rows`` (a prepare function: documents' ``columns`` -> a table in ``schema``) over every
    document of ``df``, on Spark: where no prepare task saved them."""

    def batches_of(batches):
        for rb in batches:
            yield from rows(rb).to_batches()

    return df.select(*columns).mapInArrow(timed(batches_of), from_arrow_schema(schema))


def earlier_entries(df: DataFrame, stage: IndexedStage, columns: list[str]) -> DataFrame | None:
    """The entries of the indexes ``stage`` loads, ids prefixed with EARLIER (None without indexes).
    Every index is checked (format, configuration, checksums) before anything runs."""
    if not stage.load_indexes:
        return None
    paths = [p for index in stage.load_indexes for p in open_index(index, stage.index_config())]
    entries = df.sparkSession.read.parquet(*paths)
    return entries.select(F.concat(F.lit(EARLIER), F.col("id")).alias("id"), *columns)


def resolve_earlier(clusters: DataFrame, cluster: str) -> DataFrame:
    """Mark each document whose root is not itself as DUPLICATE; roots from an index lose their
    prefix, and the indexed documents themselves leave (they are not this run's to mark)."""
    earlier = F.col(cluster).startswith(EARLIER)
    clusters = clusters.where(~F.col("id").startswith(EARLIER)).withColumn(DUPLICATE, F.col(cluster) != F.col("id"))
    return clusters.withColumn(
        cluster, F.when(earlier, F.col(cluster).substr(F.lit(2), F.length(cluster))).otherwise(F.col(cluster))
    )


def save_index(entries: DataFrame, stage: IndexedStage) -> None:
    """Write this run's kept entries (never those loaded from indexes) as a new index."""
    check_dataset_folder(join_path(stage.save_index, DATA))  # Spark replaces it whole
    begin_write(stage.save_index)
    entries = materialize(entries.where(~F.col("id").startswith(EARLIER)))
    entries.write.mode("overwrite").parquet(join_path(stage.save_index, DATA))
    write_manifest(stage.save_index, stage.index_config(), entries.count())


def write_clusters(clusters: DataFrame, ctx, cluster: str, size: str) -> None:
    if ctx is not None and getattr(ctx, "step_dir", None):
        clusters.where(F.col(size) > 1).write.mode("overwrite").parquet(ctx.step_dir.rstrip("/") + "/clusters")
