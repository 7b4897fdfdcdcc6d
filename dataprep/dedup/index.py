"""Saved dedup indexes, so snapshot after snapshot can be deduplicated against what is already kept.

A run of ``exact_dedup`` or ``minhash_dedup`` with ``save_index: DIR`` writes what it kept; a later run
with ``load_indexes: [DIR, ...]`` removes its documents that duplicate an indexed one (the duplicate's
cluster names the earlier id) and never touches the earlier data. Without indexes every run is
deduplicated on its own (FineWeb's per-snapshot dedup), the default.

Format, version 1 (a folder):

    DIR/index.json   {"format": "ccpretrain-dedup-index", "version": 1, "config": {...}, "rows": N,
                      "files": [{"name": "data/part-....parquet", "bytes": B, "sha256": "..."}]}
    DIR/data/*.parquet
        exact_dedup:   id string, hash binary       (the normalized text's digest)
        minhash_dedup: id string, sig array<int>, keys array<bigint>   (signature and band keys)

``config`` holds every parameter that changes what is stored (hash and normalization; n-gram sizes,
hashes, bands x rows and seed) and ``normalizer``, the version of the normalization code. Loading an
index whose config differs from the stage's, whose version is unknown, or whose files do not match
their size and SHA-256 is an error that says which. ``index.json`` is written last, so a folder
without one is an unfinished write, not an index.
"""

from __future__ import annotations

import hashlib
import json

import fsspec
import pyarrow as pa
from pydantic import Field, model_validator

from dataprep.core.errors import UsageError
from dataprep.core.stage import GlobalStage
from dataprep.core.storage import atomic_write_text, exists, join_path, read_text

FORMAT = "ccpretrain-dedup-index"
VERSION = 1
MANIFEST = "index.json"
DATA = "data"
# Bumped whenever normalize.py changes what a text normalizes or shingles to: old indexes then refuse to load.
NORMALIZER = "fineweb-1"
# Ids of indexed (earlier) documents carry this prefix inside a run: it sorts before any real id, so a
# cluster with an earlier document has it as its root, and every new member is the duplicate.
EARLIER = "\x00"


class DedupIndexError(UsageError):
    """An index that cannot be used: missing, from another configuration, or corrupt."""


class IndexedStage(GlobalStage):
    """A dedup stage that can save what it kept and load what earlier runs kept (Spark runs only)."""

    save_index: str | None = Field(None, description="write this run's kept documents as a dedup index to this folder")
    load_indexes: list[str] = Field([], description="indexes of earlier runs: documents duplicating them are removed")
    priority: list[str] = Field(
        [],
        description="source kinds, best first: a cluster keeps the copy whose source_kind comes "
        "first (e.g. [wikipedia, books, web]) instead of the smallest id; removals counted per pair of sources",
    )

    def by_priority(self, clusters: pa.Table, documents: pa.Table, cluster: str) -> pa.Table:
        """The in-memory clusters with their kept copies chosen by ``priority`` (unchanged without one)."""
        if not self.priority:
            return clusters
        from dataprep.dedup.priority import pair_counts, prioritize

        clusters = prioritize(clusters, documents, self.priority, cluster)
        for pair, n in pair_counts(clusters, documents, cluster).items():
            self.count(pair, n)
        return clusters

    @model_validator(mode="after")
    def _check_index_paths(self) -> "IndexedStage":
        if self.save_index and self.save_index in self.load_indexes:
            raise ValueError(
                f"save_index {self.save_index!r} is also in load_indexes: an index cannot be rewritten while it is read"
            )
        return self

    def index_config(self) -> dict:
        """The parameters an index's contents depend on (an index made with others is refused)."""
        raise NotImplementedError

    def check_local(self) -> None:
        if self.save_index or self.load_indexes:
            raise UsageError(
                f"{self.name}: save_index and load_indexes work in Spark runs (dataprep run), not in memory"
            )


def _sha256(fs, path: str) -> str:
    digest = hashlib.sha256()
    with fs.open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def begin_write(index_dir: str) -> None:
    """Remove the manifest of an index about to be rewritten: until the new one is committed, the
    folder is no index at all rather than one whose files do not match."""
    fs, _, (root,) = fsspec.get_fs_token_paths(index_dir)
    if fs.exists(join_path(root, MANIFEST)):
        fs.rm(join_path(root, MANIFEST))


def write_manifest(index_dir: str, config: dict, rows: int) -> dict:
    """Checksum the data files written under ``index_dir/data`` and commit them with ``index.json``."""
    fs, _, (root,) = fsspec.get_fs_token_paths(index_dir)
    files = []
    for path in sorted(fs.find(join_path(root, DATA))):
        name = path[len(root.rstrip("/")) + 1 :]
        if path.endswith(".parquet") and not name.split("/")[-1].startswith((".", "_")):
            files.append({"name": name, "bytes": fs.size(path), "sha256": _sha256(fs, path)})
    manifest = {"format": FORMAT, "version": VERSION, "config": config, "rows": rows, "files": files}
    atomic_write_text(join_path(index_dir, MANIFEST), json.dumps(manifest, indent=1, sort_keys=True))
    return manifest


def open_index(index_dir: str, config: dict) -> list[str]:
    """The data files of a saved index, after checking its format, version, configuration and checksums."""
    manifest_path = join_path(index_dir, MANIFEST)
    if not exists(manifest_path):
        raise DedupIndexError(f"dedup index {index_dir}: no {MANIFEST} (not an index, or its write did not finish)")
    manifest = json.loads(read_text(manifest_path))
    if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
        raise DedupIndexError(
            f"dedup index {index_dir}: format {manifest.get('format')!r} version "
            f"{manifest.get('version')!r}; this code reads {FORMAT!r} version {VERSION}"
        )
    saved = manifest.get("config", {})
    differs = [
        f"{k}: index {saved.get(k)!r}, stage {config.get(k)!r}"
        for k in sorted(set(saved) | set(config))
        if saved.get(k) != config.get(k)
    ]
    if differs:
        raise DedupIndexError(
            f"dedup index {index_dir} was built with another configuration ({'; '.join(differs)}); rebuild "
            "it or match the stage to it"
        )
    fs, _, (root,) = fsspec.get_fs_token_paths(index_dir)
    paths = []
    for entry in manifest["files"]:
        path = join_path(root, entry["name"])
        if not fs.exists(path) or fs.size(path) != entry["bytes"] or _sha256(fs, path) != entry["sha256"]:
            raise DedupIndexError(f"dedup index {index_dir}: {entry['name']} is missing or does not match its checksum")
        paths.append(join_path(index_dir, entry["name"]))
    return paths
