"""File plumbing shared by every part: paths, streaming opens, atomic writes and assets shipped with a job.

Paths may be local or any fsspec URL (s3://, gs://, https://). Writes go to a temporary name and are
renamed into place, so a crash never leaves a half-written file under the final name. Which files a run
reads is ``dataprep.core.inputs``.
"""

from __future__ import annotations

import gzip
import os
import shutil
import socket
import tempfile
from contextlib import contextmanager
from typing import IO, Iterator

import fsspec

from dataprep.core.errors import MissingPath, OutputExists, UsageError

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
