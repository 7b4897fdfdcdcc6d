"""Which files a run reads: files, folders, globs and Common Crawl ``*.paths(.gz)`` listings expanded into
one sorted list, links that lead out of an input folder refused, and JSONL inputs read record by record.

Patterns may be local or any fsspec URL (s3://, gs://, https://); an object store that cannot be reached
is one line naming the input.
"""

from __future__ import annotations

import io
import json
import logging
import os
from contextlib import contextmanager
from typing import Iterator

import fsspec

from dataprep.core.errors import MissingPath, UsageError
from dataprep.core.storage import decoded_name, is_url, open_stream

log = logging.getLogger(__name__)
# Common Crawl publishes per-crawl listings such as warc.paths.gz: one relative path per line.
COMMON_CRAWL_PREFIX = "https://data.commoncrawl.org/"


def is_paths_file(path: str) -> bool:
    name = os.path.basename(path)
    return name.endswith((".paths", ".paths.gz"))


def expand_inputs(
    patterns: list[str], paths_prefix: str = COMMON_CRAWL_PREFIX, skip_links_out: bool = False
) -> list[str]:
    """Turn files, directories, globs and Common Crawl ``*.paths(.gz)`` listings into a sorted,
    de-duplicated list of files. Raises FileNotFoundError naming any pattern that matches nothing (a
    listing naming no file too), so a mistyped path stops the run before any work. ``skip_links_out``:
    leave out, with a warning naming each, links that ``refused_link`` would not read (the pipeline keeps
    them, for its reader to count)."""
    files: list[str] = []
    for pattern in patterns:
        if is_paths_file(pattern):
            listed = len(files)
            with _remote_errors(pattern), open_stream(pattern) as fh:
                for line in io.TextIOWrapper(fh, encoding="utf-8"):
                    line = line.strip()
                    if line and not line.startswith("#"):
                        files.append(line if "://" in line or line.startswith("/") else paths_prefix + line)
            if len(files) == listed:
                raise MissingPath(f"input listing {pattern!r} names no file")
            continue
        fs, _, _ = fsspec.get_fs_token_paths(pattern)
        if is_url(pattern) and not is_glob(pattern):
            files.append(pattern)  # a single remote object: opened by the task that reads it
            continue
        found = []
        with _remote_errors(pattern):
            for match in glob_or_literal(pattern, fs):
                if fs.isdir(match):
                    found.extend(
                        p
                        for p in fs.find(match)
                        if not os.path.basename(p).startswith((".", "_")) and not _hf_metadata(fs, p)
                    )
                elif fs.exists(match):
                    found.append(match)
        if not found:
            raise MissingPath(f"input {pattern!r} matches no file")
        protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        files.extend(f if protocol in ("file", "local") else f"{protocol}://{f}" for f in found)
    files = sorted(dict.fromkeys(files))
    return [f for f in files if not _link_out(f, patterns)] if skip_links_out else files


def _link_out(path: str, patterns: list[str]) -> bool:
    folder = input_folder(path, patterns)
    if folder and refused_link(path, folder):
        log.warning(
            "%s: a link to %s, outside the input folder %s: not read",
            decoded_name(path),
            decoded_name(os.path.realpath(path)),
            folder,
        )
        return True
    return False


def is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


def glob_or_literal(pattern: str, fs=None) -> list[str]:
    """What ``pattern`` names: itself when a file or folder of that very name exists (a name may hold
    ``[``, ``]``, ``*`` or ``?``), else its glob's matches, sorted."""
    fs = fs or fsspec.get_fs_token_paths(pattern)[0]
    if not is_glob(pattern) or fs.exists(pattern):
        return [pattern]
    return sorted(fs.glob(pattern))


@contextmanager
def _remote_errors(pattern: str) -> Iterator[None]:
    """An object store that cannot be reached (no credentials, no network) as one line naming the input."""
    try:
        yield
    except (FileNotFoundError, ValueError):
        raise
    except Exception as exc:
        if not is_url(pattern) or isinstance(exc, ImportError):
            raise
        hint = ""
        if pattern.startswith("s3://commoncrawl/"):  # Common Crawl's bucket is also public over HTTPS
            hint = f" (it is public over HTTPS too, no credentials needed: {COMMON_CRAWL_PREFIX}{pattern.removeprefix('s3://commoncrawl/')})"
        raise InputUnreachable(f"cannot read input {pattern!r}: {type(exc).__name__}: {exc}{hint}") from None


class InputUnreachable(MissingPath):
    """An input on an object store or web server that cannot be read (credentials, network)."""


def input_folder(path: str, patterns: list[str]) -> str | None:
    """The input folder (or a glob's folder) that ``path`` was found in; None when ``path`` was named
    itself, came from a listing, or is remote. Links below that folder are judged by ``refused_link``."""
    if is_url(path):
        return None
    full = os.path.abspath(path.removeprefix("file://"))
    local = [os.path.abspath(p.removeprefix("file://")) for p in patterns if not (is_url(p) or is_paths_file(p))]
    if full in local:
        return None
    for named in local:
        if is_glob(named) and not os.path.exists(named):
            named = named[: min(named.find(ch) for ch in "*?[" if ch in named)].rpartition(os.sep)[0] or os.sep
        if full.startswith(named.rstrip(os.sep) + os.sep):
            return named
    return None


def refused_link(path: str, folder: str) -> str | None:
    """Why a file found below the input ``folder`` is not read: ``link_outside_input`` when a link (its own
    or a folder's on the way) leads outside ``folder``, ``link_to_folder`` for a link to a folder (links
    are not walked); None for a plain file or a link to a file inside ``folder``."""
    real = os.path.realpath(path)
    if real == os.path.abspath(path):
        return None
    if os.path.commonpath([real, os.path.realpath(folder)]) != os.path.realpath(folder):
        return "link_outside_input"
    return "link_to_folder" if os.path.isdir(real) else None


def check_output_outside_inputs(output: str, patterns: list[str]) -> None:
    """Refuse an output folder inside an input folder: the run would read its own files as input."""
    if is_url(output):
        return
    out = os.path.realpath(output.removeprefix("file://"))
    for pattern in patterns:
        if is_url(pattern) or is_paths_file(pattern):
            continue
        for match in glob_or_literal(pattern.removeprefix("file://")):
            folder = os.path.realpath(match)
            if os.path.isdir(folder) and os.path.commonpath([out, folder]) == folder:
                raise UsageError(
                    f"output {output!r} lies inside the input folder {match!r}: the run would read its own "
                    "output as input; choose an output folder outside it"
                )


HF_DATASET_METADATA = ("state.json", "dataset_info.json", "dataset_dict.json")


def _hf_metadata(fs, path: str) -> bool:
    """A Hugging Face ``save_to_disk`` folder's bookkeeping files: its documents are the ``.arrow`` files
    beside them."""
    folder, name = os.path.split(path)
    return name in HF_DATASET_METADATA and (name == "dataset_dict.json" or bool(fs.glob(f"{folder}/*.arrow")))


def read_jsonl_records(paths: list[str], limit: int | None = None) -> Iterator[tuple[dict | None, int, str]]:
    """Yield (record or None, line number, path) for every non-blank line of JSONL files (local, remote,
    ``.gz``); None for a line that is not a JSON object, so callers count it instead of crashing."""
    seen = 0
    for path in expand_inputs(paths, skip_links_out=True):
        with open_stream(path) as raw:
            for lineno, line in enumerate(io.TextIOWrapper(raw, encoding="utf-8", errors="replace"), 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except ValueError:
                    record = None
                yield (record if isinstance(record, dict) else None), lineno, path
                seen += 1
                if limit is not None and seen >= limit:
                    return


def read_jsonl_field(paths: list[str], field: str, limit: int | None = None) -> tuple[list[str], int]:
    """The non-empty string values of ``field`` and how many lines lacked one."""
    texts, skipped = [], 0
    for record, _, _ in read_jsonl_records(paths, limit):
        value = record.get(field) if record else None
        if isinstance(value, str) and value.strip():
            texts.append(value)
        else:
            skipped += 1
    return texts, skipped
