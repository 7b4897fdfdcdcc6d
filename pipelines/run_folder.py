"""Which run an output folder belongs to, so that a run never replaces another run's output unless told to.

A run claims its folder before any work with ``_RUN.json``: the identity of what it computes (its input
files and every setting that changes a document or a file it writes) and a short description for
people. A rerun with the same identity resumes (the steps' own markers say what is left); any other run
is refused before Spark starts, leaving the folder byte-for-byte as it was, unless ``overwrite``. Spark
settings and the error budget are not part of the identity: the same run may resume on a cluster, or
with a larger budget after a failure. Having claimed it, the run hands its lineage (config, input
listing, code version) to the stages that record it, such as tokenize's manifest (``claim_output``).

The record also lists what the run wrote (``written``): files by name, and the folders Spark writes whole
(``steps/NN_name/``, ``corpus/``) with a trailing ``/``. ``overwrite`` removes only those, and refuses,
naming them, when the folder holds anything else: nothing deletes a file the toolkit did not write.
"""

from __future__ import annotations

import os
import time

import fsspec

from dataprep.core.config import PipelineConfig
from dataprep.core.errors import UsageError
from dataprep.core.provenance import code_version, listing, now, sha256_json
from dataprep.core.run_record import RUN_MARKER, read_record, write_record
from dataprep.core.storage import is_url, join_path, remove_tree
from pipelines.steps import Step
from pipelines.tasks import fingerprint_of

# What every pipeline run writes, besides its steps: Spark dataset folders (written whole) and files.
RUN_ENTRIES = ("corpus/", "_checkpoints/", "stats.json")


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
    return (
        f"input {shown or '(none)'}: {files} file{'' if files == 1 else 's'}; stages "
        f"{', '.join(record.get('stages', [])) or '(none)'}; "
        f"started {record.get('started', '?')}"
    )


def claim(
    out: str, identity: str, description: dict, overwrite: bool = False, step_names: tuple[str, ...] = ()
) -> None:
    """Make ``out`` this run's folder, or raise OutputInUse saying whose it is and what to do.

    With ``overwrite``, what another run wrote (its record's ``written``) is removed, except its steps
    that this run shares by name: their markers' fingerprints decide what is reused. Anything else in
    the folder is refused by name before anything is removed."""
    names = _listing(out)
    record = None
    if names:
        record = read_record(out) if RUN_MARKER in names else None
        if record is not None and record.get("identity") == identity:
            return  # the same run: resume
        if not overwrite:
            replace = (
                "choose another --output, or pass --overwrite to replace it (steps with the same config and "
                "input are still reused)"
            )
            if record is not None:
                held = f"the output of another run ({_describe(record)})"
            elif {"steps", "corpus", "stats.json"} & set(names):
                held = "a pipeline output with no run record (written by an older ccpretrain)"
                replace = "choose another --output, or delete it yourself (no record says which files a run wrote)"
            else:
                held = (
                    f"files that are not a pipeline output ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
                )
                replace = "choose another --output (a run deletes no file it did not write)"
            raise OutputInUse(
                f"output {out!r} already holds {held}. A run never replaces another run's output: {replace}"
            )
        _remove_written(out, (record or {}).get("written", []), step_names)
    written = [f"steps/{step}/" for step in step_names] + list(RUN_ENTRIES)
    write_record(
        out,
        {
            "identity": identity,
            **description,
            "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "written": written,
        },
    )


def claim_output(config: PipelineConfig, steps: list[Step], files: list[str], overwrite: bool) -> None:
    """Refuse (before any work) an output folder that holds another run's output, unless overwriting; then
    hand the stages that record it (tokenize's manifest) the run's lineage: config, input listing, code."""
    identity = fingerprint_of(
        {
            "files": files,
            "input": config.input.model_dump(mode="json"),
            "output": config.output.model_dump(mode="json", exclude={"dir"}),
            "steps": [step.fingerprint() for step in steps],
        }
    )
    out = config.output.dir
    description = {"inputs": config.input.paths, "input_files": len(files), "stages": [s.name for s in config.stages]}
    claim(out, identity, description, overwrite, tuple(step.name for step in steps))
    run = {
        "identity": identity,
        "config": config.source_path,
        "config_sha256": sha256_json(config.model_dump(mode="json")),
        "inputs": config.input.paths,
        "input_listing": listing([f if is_url(f) else os.path.abspath(f) for f in files]),
        "output": out if is_url(out) else os.path.abspath(out),
        "stages": [s.name for s in config.stages],
        "code": code_version(),
        "time": now(),
    }
    for stage in config.stages:
        stage.record_run(run)


def _files(out: str) -> list[str]:
    """Every file under ``out``, relative to it."""
    fs, _, (root,) = fsspec.get_fs_token_paths(out)
    root = root.rstrip("/") + "/"
    return sorted(path.removeprefix(root) for path in fs.find(root))


def _toolkit_named(relative: str) -> bool:
    """Inside a folder Spark writes whole: its part files, markers (``_*``), temporaries and checksums
    (``.*``) and bookkeeping folders (``_stats/``, ``_temporary/``); a file named otherwise is a person's."""
    *folders, name = relative.split("/")
    return name.startswith(("part-", "_", ".")) or any(folder.startswith("_") for folder in folders)


def foreign_files(out: str, written: list[str]) -> list[str]:
    """The files under ``out`` that its run record does not list as written by the toolkit."""
    folders = tuple(entry for entry in written if entry.endswith("/"))
    files = set(written) | {RUN_MARKER}
    foreign = []
    for path in _files(out):
        folder = next((f for f in folders if path.startswith(f)), None)
        ours = (
            _toolkit_named(path.removeprefix(folder))
            if folder
            else path in files or path.rsplit("/", 1)[-1].startswith(".tmp-")
        )
        if not ours:
            foreign.append(path)
    return foreign


def check_dataset_folder(folder: str) -> None:
    """Before Spark replaces a dataset folder whole (``corpus/``): refuse when it holds a person's files."""
    fs, _, (root,) = fsspec.get_fs_token_paths(folder)
    if not fs.isdir(root):
        return
    foreign = [path for path in _files(folder) if not _toolkit_named(path)]
    if foreign:
        raise OutputInUse(
            f"{folder} holds files no ccpretrain run wrote ({', '.join(foreign[:5])}), and the run rewrites "
            "that folder whole: move them away and rerun"
        )


def _remove_written(out: str, written: list[str], step_names: tuple[str, ...]) -> None:
    """Remove what a previous run wrote, after checking that nothing else is in the folder."""
    foreign = foreign_files(out, written)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise OutputInUse(
            f"output {out!r} holds files its run record does not list as written by ccpretrain ({shown}); --overwrite "
            f"removes only what a run wrote (listed in its {RUN_MARKER}): move those files away, or choose "
            "another --output"
        )
    fs, _, (root,) = fsspec.get_fs_token_paths(out)
    keep = {f"steps/{step}/" for step in step_names}
    for entry in written:
        if entry not in keep:
            remove_tree(join_path(out, entry.rstrip("/")))
    for path in _files(out):  # temporaries of a killed run
        if path.rsplit("/", 1)[-1].startswith(".tmp-"):
            fs.rm(join_path(root, path))
    parents = {entry.rstrip("/").rsplit("/", 1)[0] for entry in written if "/" in entry.rstrip("/")}
    for folder in sorted(parents, key=len, reverse=True):  # left empty by the removal (report/, steps/)
        path = join_path(root, folder)
        if fs.isdir(path) and not fs.ls(path):
            fs.rmdir(path)
