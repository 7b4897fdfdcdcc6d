"""Source code -> one row per file, with its repository, path, language, licence and size.

Inputs (``input.format: code``), each one Spark task:
- a folder: a repository, a git checkout (``.git`` skipped) or a folder of repositories. A file's repository is
  the nearest folder above it holding a licence file (LICENSE, COPYING, ...) or ``.git``, looked for up
  from the file through the folder given and above it; where there is none, the folder given.
- an installed package, a ``*.dist-info`` folder: the files its RECORD lists, its licence from its
  metadata (a ``site-packages`` folder given as input becomes one input per package: ``expand_code_inputs``);
- a ``.tar`` (``.tar.gz``, ``.tgz``, ...) or ``.zip`` of repositories, streamed twice: once for the licence
  files and ``.git`` folders that say where repositories begin, once for the files. In an archive a file's
  repository is the nearest folder holding a licence file or ``.git``, else its top folder;
- The Stack-style records, ``.jsonl(.gz)`` or ``.parquet``: ``content`` with ``path``, ``repo`` and
  ``license`` (also The Stack v1's ``max_stars_repo_*`` names, ``text``, ``lang``).

Every file becomes a row; those that cannot be text are counted drops of stage ``read``: ``binary`` (a
binary name, or NUL bytes), ``undecodable`` (not UTF-8), ``too_large``, ``empty``, ``error:unreadable``;
a broken archive keeps the files before the break and one ``error:truncated`` (``error:malformed_record``
when nothing could be read). Version-control and bytecode-cache folders (``.git``, ``__pycache__``, ...)
are counted as skipped records: by folder in a folder, by file in an archive.

This module expands the inputs, sends each to its reader and reads the records; folders, installed packages
and archives are read by ``code_repositories``, and every file's row is made by ``code_rows``.
"""

from __future__ import annotations

import glob
import os
from typing import Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from dataprep.code.licenses import NO_LICENSE
from dataprep.core.config import InputConfig
from dataprep.core.errors import MissingPath
from dataprep.core.inputs import expand_inputs, glob_or_literal
from dataprep.core.stage import StageResult
from dataprep.core.storage import is_url, open_stream
from dataprep.readers.batches import CODE_READ_SCHEMA, Batches, hash_id
from dataprep.readers.code_repositories import ARCHIVES, read_archive, read_package, read_tree
from dataprep.readers.code_rows import add_file, file_id
from dataprep.readers.documents import jsonl_records

KIND = "code"
_RECORDS = (".jsonl", ".jsonl.gz", ".json", ".json.gz", ".ndjson", ".ndjson.gz", ".parquet")
_FIELDS = {
    "content": ("content", "text"),
    "path": ("path", "max_stars_repo_path", "file_path"),
    "repo": ("repo", "repo_name", "max_stars_repo_name"),
    "language": ("language", "lang"),
    "license": ("license", "licenses", "max_stars_repo_licenses", "detected_licenses", "license_type"),
}


def expand_code_inputs(patterns: list[str]) -> list[str]:
    """The inputs of a code run, one Spark task each: folders, ``*.dist-info`` folders (a folder holding them,
    such as ``site-packages``, gives one per package), archives and record files. Raises FileNotFoundError
    naming a pattern that matches nothing."""
    inputs: list[str] = []
    for pattern in patterns:
        if is_url(pattern):
            inputs.extend(expand_inputs([pattern]))
            continue
        matches = [m for m in glob_or_literal(pattern) if os.path.exists(m)]
        if not matches:
            raise MissingPath(f"input {pattern!r} matches no file or folder")
        for match in matches:
            packages = (
                sorted(glob.glob(os.path.join(glob.escape(match), "*.dist-info"))) if os.path.isdir(match) else []
            )
            inputs.extend(packages or [match])
    return list(dict.fromkeys(inputs))


def read_code(path: str, cfg: InputConfig, out: Batches) -> Iterator[StageResult]:
    out.kind, out.schema = KIND, CODE_READ_SCHEMA
    name = path.rstrip("/").lower()
    if not is_url(path) and os.path.isdir(path):
        reader = read_package if name.endswith(".dist-info") else read_tree
    elif name.endswith(ARCHIVES):
        reader = read_archive
    elif name.endswith(_RECORDS):
        reader = _read_parquet_records if name.endswith(".parquet") else _read_jsonl_records
    else:  # one source file: its repository is found above it
        reader = read_tree
    yield from reader(path, cfg, out)


# ---------------------------------------------------------------------------------------------
# The Stack-style records


def _record(out: Batches, cfg: InputConfig, record: dict, n: int) -> None:
    def field(key):
        return next((record[k] for k in _FIELDS[key] if record.get(k) is not None), None)

    content, path, repo, license = field("content"), field("path"), field("repo"), field("license")
    if isinstance(license, (list, tuple)):
        license = " AND ".join(sorted(str(x) for x in license)) or None
    path = path if isinstance(path, str) else ""
    repo = repo if isinstance(repo, str) else ""
    doc_id = record.get("id") or record.get("blob_id") or record.get("hexsha")
    row = {
        "id": str(doc_id) if doc_id else (file_id(repo, path) if path else hash_id(out.source, n)),
        "path": path or None,
        "repo": repo or None,
        "license": license if isinstance(license, str) else NO_LICENSE,
    }
    if content is None:
        return out.drop("missing_field:content", **row)
    if not isinstance(content, (str, bytes)):
        return out.drop("error:malformed_record", **row)
    data = content.encode("utf-8", errors="surrogatepass") if isinstance(content, str) else content
    lang = field("language")
    size = record.get("size") if isinstance(record.get("size"), int) else len(data)
    add_file(out, cfg, repo, path, data, row["license"], size, lang if isinstance(lang, str) else None, row["id"])


def _read_jsonl_records(path: str, cfg: InputConfig, out: Batches) -> Iterator[StageResult]:
    yield from jsonl_records(path, cfg, out, lambda record, n: _record(out, cfg, record, n), count_lines=False)


def _read_parquet_records(path: str, cfg: InputConfig, out: Batches) -> Iterator[StageResult]:
    n = 0
    with open_stream(path, decompress=False) as fh:
        try:
            parquet = pq.ParquetFile(fh)
            for batch in parquet.iter_batches(batch_size=cfg.batch_size):
                for record in batch.to_pylist():
                    if out.full():
                        yield out.flush()
                    n += 1
                    _record(out, cfg, record, n)
        except (pa.ArrowException, OSError) as exc:
            out.file_error("error:corrupt_parquet", f"reading stopped after row {n}", exc)
