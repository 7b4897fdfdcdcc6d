"""Repositories on disk and in archives -> the code reader's rows: where each repository begins (the
nearest folder holding a licence file or ``.git``), its licence, and its files in order.

Folders and git checkouts are walked (``read_tree``), installed packages read as their ``RECORD`` lists
(``read_package``), archives streamed twice (``read_archive``). Version-control and bytecode-cache
folders are counted as skipped records; links leading out of the input are dropped rows.
"""

from __future__ import annotations

import csv
import os
import posixpath
import stat
import zipfile
from functools import lru_cache
from typing import Callable, Iterator

from dataprep.code.licenses import NO_LICENSE, is_license_file, license_of_files, license_of_metadata
from dataprep.code.rules import VENDORED_DIRS
from dataprep.core.config import InputConfig
from dataprep.core.inputs import refused_link
from dataprep.core.stage import StageResult
from dataprep.core.stats import RECORDS_SKIPPED
from dataprep.core.storage import decoded_name, open_stream
from dataprep.readers.archives import ARCHIVE_ERRORS, member_name, open_tar
from dataprep.readers.batches import BadInputFile, Batches, broken_file_reason
from dataprep.readers.code_rows import add_file, file_id, text_name

SKIPPED_FOLDERS = {".git", ".hg", ".svn", "__pycache__"}
ARCHIVES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz", ".zip")


# ---------------------------------------------------------------------------------------------
# Folders


def _is_repository(folder: str) -> bool:
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    return ".git" in names or any(is_license_file(n) and os.path.isfile(os.path.join(folder, n)) for n in names)


@lru_cache(maxsize=1024)
def _folder_license(folder: str) -> str:
    """A repository folder's licence; cached, as every input below one folder (the standard library's
    packages below its LICENSE.txt) asks for the same."""
    texts = []
    try:
        for name in sorted(os.listdir(folder)):
            full = os.path.join(folder, name)
            if is_license_file(name) and os.path.isfile(full) and not refused_link(full, folder):
                with open(full, "rb") as fh:
                    texts.append(fh.read(1 << 20).decode("utf-8", errors="replace"))
    except OSError:  # an unreadable licence is no licence: the policy decides
        pass
    return license_of_files(texts) or NO_LICENSE


def read_tree(path: str, cfg: InputConfig, out: Batches) -> Iterator[StageResult]:
    top = os.path.abspath(path)
    if os.path.isfile(top):
        top, only = os.path.dirname(top), os.path.basename(top)
    else:
        only = None
    above = next((p for p in _parents(top) if _is_repository(p)), None)
    roots = {top: top if _is_repository(top) else above or top}  # folder -> its repository's folder
    licenses: dict[str, str] = {}
    for folder, dirs, files in os.walk(
        top, onerror=lambda exc: out.file_error("error:unreadable", "cannot list a folder", exc)
    ):
        for skipped in [d for d in dirs if d in SKIPPED_FOLDERS]:
            out.counters[f"{RECORDS_SKIPPED}{skipped.strip('_.')}_folder"] += 1
        dirs[:] = [d for d in dirs if d not in SKIPPED_FOLDERS]
        links = [d for d in dirs if os.path.islink(os.path.join(folder, d))]  # never walked: dropped below
        dirs[:] = sorted(d for d in dirs if d not in links)
        files = sorted(files + links)
        if only is not None:
            dirs[:], files = [], [only]
        if folder not in roots:  # a folder with its own .git or licence is a repository, unless vendored into one
            outer = roots[os.path.dirname(folder)]
            vendored = VENDORED_DIRS.intersection(os.path.relpath(folder, outer).split(os.sep))
            roots[folder] = folder if _is_repository(folder) and not vendored else outer
        root = roots[folder]
        if root not in licenses:
            licenses[root] = _folder_license(root)
        for name in files:
            if out.full():
                yield out.flush()
            full = os.path.join(folder, name)
            rel = text_name(out, os.path.relpath(full, root).replace(os.sep, "/"))
            repo = decoded_name(os.path.basename(root))
            # os.walk enters no linked folder: only the file itself can be a link (one named as the input is read)
            if only is None and os.path.islink(full) and (reason := refused_link(full, top)):
                _drop_link(out, reason, full, top, id=file_id(repo, rel), path=rel, repo=repo)
                continue
            try:
                info = os.stat(full)
                if not stat.S_ISREG(info.st_mode):  # fifos, sockets, devices: nothing to read
                    out.counters[f"{RECORDS_SKIPPED}not_a_file"] += 1
                    continue
                with open(full, "rb") as fh:
                    data = fh.read(cfg.max_document_bytes + 1)
            except OSError as exc:
                out.drop("error:unreadable", exc, id=file_id(repo, rel), path=rel, repo=repo)
                continue
            add_file(out, cfg, repo, rel, data, licenses[root], info.st_size)


def _drop_link(out: Batches, reason: str, full: str, tree: str, **row) -> None:
    """A link that is not read: a dropped row whose error names the link and where it leads."""
    message = f"{full}: a link to {os.path.realpath(full)}, not read (only links to files inside {tree} are)"
    out.drop(reason, BadInputFile(decoded_name(message)), **row)


def _parents(folder: str) -> Iterator[str]:
    while (parent := os.path.dirname(folder)) != folder:
        yield parent
        folder = parent


def read_package(path: str, cfg: InputConfig, out: Batches) -> Iterator[StageResult]:
    """An installed package: the files its ``*.dist-info/RECORD`` lists, beside the dist-info folder."""
    dist = os.path.abspath(path)
    site, repo = os.path.dirname(dist), os.path.basename(dist).removesuffix(".dist-info")
    try:
        with open(os.path.join(dist, "METADATA"), encoding="utf-8", errors="replace") as fh:
            metadata = fh.read()
        with open(os.path.join(dist, "RECORD"), encoding="utf-8", newline="") as fh:
            listed = [row[0] for row in csv.reader(fh) if row]
    except OSError as exc:
        out.file_error("error:malformed_record", "an installed package needs METADATA and RECORD", exc)
        return
    license_texts = []
    for folder, _, files in os.walk(dist):
        for name in sorted(files):
            if refused_link(os.path.join(folder, name), dist):
                continue
            if is_license_file(name) or os.path.relpath(folder, dist).split(os.sep)[0] == "licenses":
                with open(os.path.join(folder, name), "rb") as fh:
                    license_texts.append(fh.read(1 << 20).decode("utf-8", errors="replace"))
    license = license_of_metadata(metadata, license_texts)
    own = os.path.basename(dist) + "/"
    for rel in sorted(set(listed)):
        parts = rel.split("/")
        if rel.startswith(("/", "../")) or rel.startswith(own) or ".." in parts:
            continue  # scripts outside site-packages, and the package's own metadata
        if SKIPPED_FOLDERS.intersection(parts[:-1]):
            out.counters[f"{RECORDS_SKIPPED}cached_file"] += 1
            continue
        if out.full():
            yield out.flush()
        full = os.path.join(site, *parts)
        rel = text_name(out, rel)
        if reason := refused_link(full, site):
            _drop_link(out, reason, full, site, id=file_id(repo, rel), path=rel, repo=repo)
            continue
        try:
            with open(full, "rb") as fh:
                data = fh.read(cfg.max_document_bytes + 1)
            size = os.path.getsize(full)
        except OSError as exc:
            out.drop("error:unreadable", exc, id=file_id(repo, rel), path=rel, repo=repo)
            continue
        add_file(out, cfg, repo, rel, data, license, size)


# ---------------------------------------------------------------------------------------------
# Archives


def _members(path: str, wanted: Callable[[str], bool], limit: int) -> Iterator[tuple[str, int, bytes | None]]:
    """An archive's files in order, named relative to it (``member_name``): (name, size, its bytes if
    ``wanted(name)`` else None). A member over ``limit`` bytes, by the size its header gives, is not read:
    its bytes are ``b""``."""
    with open_stream(path, decompress=False) as raw:
        if path.lower().endswith(".zip"):
            with zipfile.ZipFile(raw) as archive:
                for info in archive.infolist():
                    if not info.is_dir():
                        name = member_name(info.filename)
                        data = None
                        if wanted(name):
                            with archive.open(info) as fh:
                                data = fh.read(limit + 1) if info.file_size <= limit else b""
                        yield name, info.file_size, data
            return
        with open_tar(raw) as archive:
            for member in archive:
                if member.isfile():
                    name = member_name(member.name)
                    data = None
                    if wanted(name):
                        data = archive.extractfile(member).read(limit + 1) if member.size <= limit else b""
                    yield name, member.size, data


def read_archive(path: str, cfg: InputConfig, out: Batches) -> Iterator[StageResult]:
    roots, texts = _archive_repositories(path)
    licenses = {root: license_of_files(found) or NO_LICENSE for root, found in texts.items()}
    fallback = os.path.basename(path.rstrip("/"))
    for suffix in ARCHIVES:
        fallback = fallback.removesuffix(suffix)
    n = 0
    try:
        for name, size, data in _members(path, lambda name: not _skipped(name), cfg.max_document_bytes):
            if out.full():
                yield out.flush()
            n += 1
            if data is None:
                out.counters[f"{RECORDS_SKIPPED}{_skipped(name).strip('_.')}_file"] += 1
                continue
            root = _archive_root(name, roots)
            repo = decoded_name(posixpath.basename(root)) or fallback
            rel = text_name(out, name[len(root) + 1 :] if root else name)
            add_file(out, cfg, repo, rel, data, licenses.get(root, NO_LICENSE), size)
    except (*ARCHIVE_ERRORS, zipfile.BadZipFile) as exc:  # a cut or corrupt archive
        reason = broken_file_reason(exc) if n else "error:malformed_record"
        out.file_error(
            "error:truncated" if n and reason == "error:malformed_record" else reason,
            f"archive reading stopped after {n} files",
            exc,
        )


def _skipped(name: str) -> str | None:
    """The version-control or cache folder a member lies in, if any."""
    return next((part for part in name.split("/")[:-1] if part in SKIPPED_FOLDERS), None)


def _archive_repositories(path: str) -> tuple[set[str], dict[str, list[str]]]:
    """The folders of an archive where repositories begin (a licence file or ``.git`` inside, outside
    vendored folders; every top folder too) and each one's licence texts. A broken archive gives what was read before
    the break."""
    roots: set[str] = set()
    texts: dict[str, list[str]] = {}
    try:
        for name, _, data in _members(path, lambda name: is_license_file(posixpath.basename(name)), 1 << 20):
            folder = posixpath.dirname(name)
            roots.add(name.split("/", 1)[0] if "/" in name else "")
            if "/.git/" in f"/{name}":
                roots.add(name.split("/.git/", 1)[0] if not name.startswith(".git/") else "")
            elif data is not None and not VENDORED_DIRS.intersection(
                folder.split("/")
            ):  # a vendored copy stays in its repository
                roots.add(folder)
                texts.setdefault(folder, []).append(data.decode("utf-8", errors="replace"))
    except (*ARCHIVE_ERRORS, zipfile.BadZipFile):
        pass  # the second pass counts the damage
    return roots, texts


def _archive_root(name: str, roots: set[str]) -> str:
    """The nearest folder above member ``name`` where a repository begins; "" for the archive's top."""
    folder = posixpath.dirname(name)
    while folder not in roots and folder not in ("", "/"):
        folder = posixpath.dirname(folder)
    return folder.strip("/")
