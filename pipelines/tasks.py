"""Resume's markers: a step's ``_STEP_DONE.json``, and within a step each task's rows, stats and completion marker.

A finished step leaves ``_STEP_DONE.json`` (``write_step_marker``): its stats, its task counts and the
fingerprint of the config and input that made it; a rerun skips the step when the fingerprint matches.

A fused step's task is named by its inputs (input files for the first step, the previous step's
Parquet parts for later ones): ``data/part-KEY.parquet`` holds its rows (kept and dropped) and
``_stats/part-KEY.json`` is its completion marker: its stats, its inputs and the fingerprint of the
config that made it. Both are written under a temporary name and renamed into place (uploaded whole
on object stores), the marker last, so a marker means the task's rows are complete; a retried or
speculative attempt rewrites the same two files with the same content.

A rerun reuses every task whose marker has the step's fingerprint and whose inputs are still
inputs of the step, deletes everything else in the step's folders (a crashed task's rows without a
marker, tasks of another config or of another task plan), and runs the inputs no reused task covers.
Summing the markers' stats gives exactly the stats of an uninterrupted run.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Iterable, Iterator

import fsspec
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dataprep.core import storage
from dataprep.core.provenance import sha256_json
from dataprep.core.runner import conform
from dataprep.core.stage import DROP_REASON
from dataprep.core.stats import StageStats, merge_all

DONE_MARKER = "_STEP_DONE.json"
DATA_DIR = "data"
STATS_DIR = "_stats"
PART = "_part"  # a global step's decision rows: the previous step's part holding the document


def fingerprint_of(obj) -> str:
    """The short digest a marker carries of the config and input that made it (and a run's identity)."""
    return sha256_json(obj)[:16]


def task_key(inputs: list[str]) -> str:
    return hashlib.sha256("\n".join(inputs).encode("utf-8", errors="surrogateescape")).hexdigest()[:20]


def data_path(step_dir: str, key: str) -> str:
    return storage.join_path(step_dir, DATA_DIR, f"part-{key}.parquet")


def marker_path(step_dir: str, key: str) -> str:
    return storage.join_path(step_dir, STATS_DIR, f"part-{key}.json")


def _names(folder: str) -> list[str]:
    """The base names of the files in ``folder`` (none when it does not exist)."""
    fs, _, (path,) = fsspec.get_fs_token_paths(folder)
    if not fs.exists(path):
        return []
    return sorted(os.path.basename(p.rstrip("/")) for p in fs.ls(path, detail=False))


def parquet_parts(folder: str) -> list[str]:
    """The Parquet files a step wrote (what Spark would read: hidden and ``_`` files left out)."""
    return [
        storage.join_path(folder, n) for n in _names(folder) if n.endswith(".parquet") and not n.startswith((".", "_"))
    ]


def read_marker(path: str) -> dict | None:
    """The JSON marker at ``path``; None when there is none or it is unreadable (a rerun redoes its work)."""
    try:
        return json.loads(storage.read_text(path)) if storage.exists(path) else None
    except (OSError, ValueError):
        return None


def write_step_marker(
    step_dir: str, fingerprint: str, wall_seconds: float, tasks: dict, stats: list[StageStats], inputs=None
) -> None:
    """Mark a step done (``DONE_MARKER``): its fingerprint, time, task counts and stats, and, for a step
    that read the input files, their state then (``pipelines.input_changes``)."""
    marker = {
        "fingerprint": fingerprint,
        "wall_seconds": wall_seconds,
        **tasks,
        "stats": [s.to_dict() for s in stats],
        **({"inputs": inputs} if inputs is not None else {}),
    }
    storage.atomic_write_text(storage.join_path(step_dir, DONE_MARKER), json.dumps(marker, indent=1))


def read_markers(spark, step_dir: str) -> Iterator[dict]:
    """Every completion marker of the step, one at a time (the driver never holds them all): read
    here when they are on this machine's disk, by Spark on object stores (there may be tens of
    thousands, and Spark reads them in parallel)."""
    folder = storage.join_path(step_dir, STATS_DIR)
    names = [n for n in _names(folder) if n.endswith(".json") and not n.startswith((".", "_"))]
    if not names:
        return
    if storage.is_url(folder):
        texts = (row.value for row in spark.read.text(folder).toLocalIterator())
    else:  # plain open(): fsspec's per-call cost adds up over one file per task
        local = folder.removeprefix("file://")
        texts = (_read_local(os.path.join(local, n)) for n in names)
    for text in texts:
        try:
            marker = json.loads(text)
        except ValueError:
            continue  # not ours (markers are written whole): never reused, removed with the rest
        if isinstance(marker, dict) and isinstance(marker.get("inputs"), list):
            yield marker


def _read_local(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def merged_stats(spark, step_dir: str, stages: list[str]) -> tuple[list[StageStats], list[str]]:
    """The step's stats, summed over its task markers as they are read (the driver holds one task's
    stats at a time, however many ran), in ``stages`` order; and the keys of the markers read."""
    keys: list[str] = []

    def task_stats():
        yield from (StageStats(name) for name in stages)
        for marker in read_markers(spark, step_dir):
            keys.append(marker.get("key", ""))
            yield from (StageStats.from_dict(d) for d in marker["stats"])

    return merge_all(task_stats()), keys


def reusable(markers: Iterable[dict], fingerprint: str, inputs: list[str], step_dir: str) -> dict[str, dict]:
    """key -> marker of the finished tasks a rerun may keep: made by this config, from inputs the step
    still has, each input in one task only, and with their rows present."""
    wanted, present = set(inputs), set(_names(storage.join_path(step_dir, DATA_DIR)))
    done: dict[str, dict] = {}
    covered: set[str] = set()
    slim = ({k: v for k, v in m.items() if k != "stats"} for m in markers)  # the stats are summed later
    for marker in sorted(slim, key=lambda m: m["inputs"]):
        key = task_key(marker["inputs"])
        files = set(marker["inputs"])
        if (
            marker.get("fingerprint") == fingerprint
            and files <= wanted
            and not files & covered
            and f"part-{key}.parquet" in present
            and marker.get("key") == key
        ):
            done[key] = marker
            covered |= files
    return done


def remove_others(step_dir: str, keep: Iterable[str]) -> None:
    """Delete every task file of the step's rows and markers (``part-*`` and temporaries) that is not a
    kept task's; a file named otherwise is nobody's task and not ours to delete."""
    keep_names = {f"part-{key}.{ext}" for key in keep for ext in ("parquet", "json")}
    for sub in (DATA_DIR, STATS_DIR):
        folder = storage.join_path(step_dir, sub)
        stale = [
            storage.join_path(folder, n)
            for n in _names(folder)
            if n not in keep_names and n.startswith(("part-", ".tmp-"))
        ]
        if stale:
            fs, _, paths = fsspec.get_fs_token_paths(stale)
            fs.rm(paths, recursive=True)


def write_task(
    step_dir: str,
    key: str,
    inputs: list[str],
    fingerprint: str,
    tables: Iterator[pa.Table],
    schema: pa.Schema,
    compression: str,
    finished,
) -> None:
    """Write one task's rows, then its marker; ``finished`` (called once the rows are written) gives
    the task's stats as dicts and what else the marker keeps (``{"stats": [...], ...}``)."""
    with storage.atomic_output(data_path(step_dir, key), suffix=".parquet") as tmp:
        with pq.ParquetWriter(tmp, schema, compression=compression) as writer:
            for table in tables:
                writer.write_table(table)
    marker = {"key": key, "fingerprint": fingerprint, "inputs": inputs, **finished()}
    storage.atomic_write_text(marker_path(step_dir, key), json.dumps(marker))  # escaped: a file name may not be UTF-8


def read_decisions(folder: str, parts: list[str]) -> pa.Table | None:
    """The decision rows of a global step for the documents of ``parts`` (the previous step's part
    names): the pipeline writes them split by part (``PART=<name>/`` folders); None when none has any."""
    fs, _, (root,) = fsspec.get_fs_token_paths(folder)
    tables = []
    for part in parts:
        where = f"{root.rstrip('/')}/{PART}={part}"
        if fs.exists(where):
            for path in sorted(fs.ls(where, detail=False)):
                if path.endswith(".parquet"):
                    with fs.open(path, "rb") as fh:
                        tables.append(pq.read_table(fh))
    return pa.concat_tables(tables, promote_options="default") if tables else None


def write_empty(step_dir: str, schema: pa.Schema, compression: str) -> None:
    """A step without tasks still leaves a dataset with its schema, so later steps can read it."""
    with storage.atomic_output(storage.join_path(step_dir, DATA_DIR, "part-empty.parquet"), suffix=".parquet") as tmp:
        pq.write_table(schema.empty_table(), tmp, compression=compression)


def read_kept(path: str, schema: pa.Schema, batch_size: int) -> Iterator[pa.Table]:
    """The kept rows of one Parquet part of the previous step, batch by batch, in ``schema`` (only its
    columns are read)."""
    with fsspec.open(path, "rb") as fh:
        parquet = pq.ParquetFile(fh)
        columns = [c for c in [*schema.names, DROP_REASON] if c in parquet.schema_arrow.names]
        for batch in parquet.iter_batches(batch_size=batch_size, columns=columns):
            table = pa.Table.from_batches([batch])
            if DROP_REASON in table.column_names:
                table = table.filter(pc.is_null(table.column(DROP_REASON)))
            if table.num_rows:
                yield conform(table, schema)


def remove_failed(spark, step_dir: str, stages: set[str]) -> None:
    """Delete the markers of the tasks with errors in ``stages``: after a step fails on its error
    budget, the rerun (once the cause is fixed, often outside the config) runs those tasks again."""
    failed = [
        m["key"]
        for m in read_markers(spark, step_dir)
        if any(s["stage"] in stages and s.get("errors") for s in m.get("stats", [])) and "key" in m
    ]
    if failed:
        fs, _, paths = fsspec.get_fs_token_paths([marker_path(step_dir, key) for key in failed])
        fs.rm(paths)
