"""What identifies a piece of data and the code that made it, for lineage: SHA-256 digests of files,
of listings and of settings, and this package's version with its git commit when it runs from a checkout.
The pipeline writes these into the token shards' manifest; training copies them into its run and its
checkpoints, and export into the model card."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
import time

PACKAGE = "ccpretrain"
MAX_NAMES = 100  # input file names kept beside a listing's digest (a crawl lists ~90,000)


def sha256_file(path: str, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def sha256_json(obj) -> str:
    """The digest of ``obj`` as canonical JSON (sorted keys): the same settings give the same digest."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def listing(files: list[str]) -> dict:
    """An input listing's digest (over its sorted names), count and first names."""
    names = sorted(files)
    raw = "\n".join(names).encode("utf-8", "surrogateescape")  # a file name that is not UTF-8 keeps its bytes
    shown = [name.encode("utf-8", "surrogateescape").decode("utf-8", "replace") for name in names[:MAX_NAMES]]
    return {"files": len(names), "sha256": hashlib.sha256(raw).hexdigest(), "names": shown}


@functools.cache
def code_version() -> dict:
    """This package's version, and the git commit of the checkout it runs from and whether tracked files
    differ from it (None when installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version(PACKAGE)
    except PackageNotFoundError:
        found = None
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    commit = dirty = None
    if os.path.exists(os.path.join(root, ".git")):
        commit = _git(root, "rev-parse", "HEAD")
        status = _git(root, "status", "--porcelain", "--untracked-files=no")
        dirty = None if status is None else bool(status)
    return {"package": PACKAGE, "version": found, "git_commit": commit, "git_dirty": dirty}


def _git(root: str, *args: str) -> str | None:
    """A git command's output in ``root``; None when git fails or is missing."""
    try:
        out = subprocess.run(["git", "-C", root, *args], check=False, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
