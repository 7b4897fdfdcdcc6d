"""File plumbing shared by every part: input expansion, streaming opens and atomic writes.

Paths may be local or any fsspec URL (s3://, gs://, https://). Writes go to a temporary name and are
renamed into place, so a crash never leaves a half-written file under the final name.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import os
import shutil
import socket
import tempfile
from contextlib import contextmanager
from typing import IO, Iterator

import fsspec

from dataprep.core.errors import MissingPath, OutputExists, UsageError

log = logging.getLogger(__name__)
# Common Crawl publishes per-crawl listings such as warc.paths.gz: one relative path per line.
COMMON_CRAWL_PREFIX = "https://data.commoncrawl.org/"
_UPLOAD_CHUNK = 1 << 20


def is_url(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def join_path(base: str, *parts: str) -> str:
    """``base/part/...`` for local paths and URLs alike (``os.path.join`` would mangle ``s3://``)."""
    if not is_url(base):
        return os.path.join(base, *parts)
    return "/".join([base.rstrip("/"), *parts])


def decoded_name(name: str) -> str:
    """A file name as text: a name whose bytes are not UTF-8 (Python keeps them as surrogates) with each
    bad byte shown as U+FFFD."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return name.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")


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


@contextmanager
def open_stream(path: str, decompress: bool = True) -> Iterator[IO[bytes]]:
    """Open a local or remote file for streaming binary reads; gzip is decompressed when asked."""
    with fsspec.open(path, "rb") as raw:
        if decompress and _gzipped(raw, path):
            with gzip.GzipFile(fileobj=raw) as fh:
                yield fh
        else:
            yield raw


def _gzipped(raw: IO[bytes], path: str) -> bool:
    """By its first bytes where the file can seek back (a misnamed file is read right), else by its name."""
    if not raw.seekable():
        return path.endswith(".gz")
    head = raw.read(2)
    raw.seek(0)
    return head == b"\x1f\x8b"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_synced(path: str, data: bytes) -> None:
    """Write ``data`` to a local file and wait until it is on disk, so a rename publishes whole files."""
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def temp_dir_for(path: str) -> str:
    """Where the temporary file for ``path`` goes: beside it, so a rename publishes it (the folder is
    made if missing); the system's temporary folder for object stores."""
    if is_url(path):
        return tempfile.gettempdir()
    directory = os.path.dirname(os.path.abspath(path.removeprefix("file://")))
    make_folder(directory)
    return directory


def make_folder(path: str) -> None:
    """``os.makedirs``, with a file in the way named as the user's mistake it is (``check_output_path``)."""
    try:
        os.makedirs(path, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        check_output_path(path, "cannot write into", folder=True)
        raise


def publish(tmp: str, path: str) -> None:
    """Move a finished local temporary file to ``path``: a rename with the usual file mode, or one
    upload on object stores (an object becomes visible only once its upload completes)."""
    if is_url(path):
        with open(tmp, "rb") as src, fsspec.open(path, "wb") as dst:
            shutil.copyfileobj(src, dst, _UPLOAD_CHUNK)
        os.unlink(tmp)
    else:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600
        os.replace(tmp, path.removeprefix("file://"))


@contextmanager
def atomic_output(path: str, prefix: str = ".tmp-", suffix: str = "") -> Iterator[str]:
    """Yield a temporary local path; it becomes ``path`` (``publish``) only if the block succeeds."""
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=temp_dir_for(path))
    os.close(fd)
    try:
        yield tmp
        publish(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def atomic_write_bytes(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a crash never leaves a half-written file under that name."""
    with atomic_output(path) as tmp:
        write_synced(tmp, data)


def atomic_write_text(path: str, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


@contextmanager
def atomic_directory(path: str, overwrite: bool = True) -> Iterator[str]:
    """Yield a temporary local folder beside ``path``; when the block succeeds it replaces ``path``
    (a folder that exists and is not empty is an error unless ``overwrite``). A failure leaves
    ``path`` as it was. The folder replaced may hold only files the new one writes too (an earlier
    output of the same command): a file of anyone else's is refused by name, never deleted."""
    path = os.path.abspath(path.removeprefix("file://"))
    check_output_path(path, "output", folder=True)
    if not overwrite and os.path.isdir(path) and os.listdir(path):
        raise OutputExists(f"{path} exists and is not empty (pass --overwrite to replace it)")
    parent = os.path.dirname(path)
    make_folder(parent)
    tmp = tempfile.mkdtemp(prefix=".tmp-", dir=parent)
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700; give the folder the usual mode
        if os.path.isdir(path):
            others = sorted(_relative_files(path) - _relative_files(tmp))
            if others:
                shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
                raise OutputExists(
                    f"{path} holds files this command does not write ({shown}): they are not "
                    "replaced; move them away or choose another output folder"
                )
            shutil.rmtree(path)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _relative_files(folder: str) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), folder) for d, _, files in os.walk(folder) for f in files}


def check_output_path(path: str, flag: str, folder: bool) -> None:
    """Refuse, before any work, an output path that cannot be written as asked: a file where a folder is
    wanted, a folder where a file is, or a parent that is a file. ValueError names ``flag`` and the path."""
    if is_url(path):
        return
    full = os.path.abspath(path.removeprefix("file://"))
    if folder and os.path.exists(full) and not os.path.isdir(full):
        raise UsageError(f"{flag} {path}: is a file, not a folder: name a new or existing folder")
    if not folder and os.path.isdir(full):
        raise UsageError(f"{flag} {path}: is a folder: name a file")
    parent = os.path.dirname(full)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise UsageError(f"{flag} {path}: {parent} is a file, not a folder")


# Folders holding the files shipped with a job (on Spark executors: SparkFiles' root), searched by base
# name when a configured asset path does not exist where the task runs.
ASSET_DIRS: list[str] = []


def resolve_asset(path: str) -> str:
    """``path`` where the task runs: as given when it exists here (or is a URL), else the copy shipped
    with the job under the same base name. Model paths in a config are the driver's; on a YARN or
    Kubernetes executor (or a worker with another working directory) only the shipped copy exists."""
    if is_url(path) or os.path.exists(path):
        return path
    name = os.path.basename(path.rstrip("/"))
    for directory in ASSET_DIRS:
        candidate = os.path.join(directory, name)
        if os.path.exists(candidate):
            return candidate
    raise MissingPath(
        f"{path!r} does not exist on {socket.gethostname()} (working directory {os.getcwd()}) "
        "and was not shipped with the job"
    )


def read_text(path: str) -> str:
    with fsspec.open(path, "rt", encoding="utf-8") as fh:
        return fh.read()


def exists(path: str) -> bool:
    fs, _, (p,) = fsspec.get_fs_token_paths(path)
    return fs.exists(p)


def remove_tree(path: str) -> None:
    """Delete a folder and what it holds (local or on an object store), if it exists."""
    fs, _, (p,) = fsspec.get_fs_token_paths(path)
    if fs.exists(p):
        fs.rm(p, recursive=True)


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
