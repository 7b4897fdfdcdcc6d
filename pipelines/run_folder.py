"""Which run an output folder belongs to, so that a run never replaces another run's output unless told to.

A run claims its folder before any work with ``_RUN.json``: the identity of what it computes (its input
files and every setting that changes a document or a file it writes) and a short description for
people. A rerun with the same identity resumes (the steps' own markers say what is left); any other run
is refused before Spark starts, leaving the folder byte-for-byte as it was, unless ``overwrite``. Spark
settings and the error budget are not part of the identity: the same run may resume on a cluster, or
with a larger budget after a failure.
"""

from __future__ import annotations

import json
import time

import fsspec

from dataprep.core.errors import UsageError
from dataprep.core.storage import atomic_write_text, join_path, read_text, remove_tree

RUN_MARKER = "_RUN.json"
# What a pipeline run writes at the top of its folder; --overwrite removes these and nothing else.
RUN_ENTRIES = ("corpus", "shards", "stats.json", "report", "tokenizer", "_checkpoints")


class OutputInUse(UsageError):
    """The output folder holds another run's output (a usage error: exit status 2)."""


def _listing(out: str) -> list[str] | None:
    """Names directly under ``out``; None when it does not exist. A file there is a usage error."""
    fs, _, (path,) = fsspec.get_fs_token_paths(out)
    if fs.isfile(path):
        raise OutputInUse(f"output {out!r} is a file; a pipeline writes a folder there: name a new or empty folder")
    try:
        return sorted(entry.rstrip("/").rsplit("/", 1)[-1] for entry in fs.ls(path, detail=False))
    except FileNotFoundError:
        return None


def _describe(record: dict) -> str:
    inputs = record.get("inputs") or []
    shown = ", ".join(inputs[:2]) + (f" and {len(inputs) - 2} more" if len(inputs) > 2 else "")
    files = record.get("input_files", "?")
    return (f"input {shown or '(none)'}: {files} file{'' if files == 1 else 's'}; stages {', '.join(record.get('stages', [])) or '(none)'}; "
            f"started {record.get('started', '?')}")


def claim(out: str, identity: str, description: dict, overwrite: bool = False, step_names: tuple[str, ...] = ()) -> None:
    """Make ``out`` this run's folder, or raise OutputInUse saying whose it is and what to do.

    With ``overwrite``, another run's top-level outputs and its steps that this run does not have are
    removed; steps this run shares by name stay, and their markers' fingerprints decide what is reused."""
    names = _listing(out)
    if names:
        marker = join_path(out, RUN_MARKER)
        record = None
        if RUN_MARKER in names:
            try:
                record = json.loads(read_text(marker))
            except (OSError, ValueError):
                record = {}
        if record is not None and record.get("identity") == identity:
            return  # the same run: resume
        if not overwrite:
            if record is not None:
                held = f"the output of another run ({_describe(record)})"
            elif {"steps", "corpus", "stats.json"} & set(names):
                held = "a pipeline output with no run record (written by an older ccpretrain)"
            else:
                held = f"files that are not a pipeline output ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
            raise OutputInUse(
                f"output {out!r} already holds {held}. A run never replaces another run's output: "
                "choose another --output, or pass --overwrite to replace it (steps with the same config and input are still reused)"
            )
        for name in RUN_ENTRIES:
            if name in names:
                remove_tree(join_path(out, name))
        if "steps" in names:
            for step in _listing(join_path(out, "steps")) or []:
                if step not in step_names:
                    remove_tree(join_path(out, "steps", step))
    record = {"identity": identity, **description, "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    atomic_write_text(join_path(out, RUN_MARKER), json.dumps(record, indent=1, ensure_ascii=False))
