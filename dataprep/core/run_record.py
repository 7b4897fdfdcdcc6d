"""A pipeline output's run record (``_RUN.json``): what computed the folder, and every file the toolkit
wrote there, so that ``--overwrite`` can remove exactly those (``pipelines.run_folder``). Here because
commands that write into a run's folder after it (``dataprep report``) add their files to it too."""

from __future__ import annotations

import json

from dataprep.core.storage import atomic_write_text, join_path, read_text

RUN_MARKER = "_RUN.json"


def read_record(out: str) -> dict | None:
    """The folder's run record; None without one, ``{}`` when it is unreadable."""
    marker = join_path(out, RUN_MARKER)
    try:
        return json.loads(read_text(marker))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}


def write_record(out: str, record: dict) -> None:
    atomic_write_text(join_path(out, RUN_MARKER), json.dumps(record, indent=1, ensure_ascii=False))


def record_written(out: str, paths: list[str]) -> None:
    """Add files written under ``out`` to its run record (``written``); paths outside ``out`` are not the
    folder's and are left out, and a folder without a record (a report pointed elsewhere) gets none."""
    record = read_record(out)
    if not record:
        return
    root = out.rstrip("/") + "/"
    written = record.get("written", [])
    new = sorted({p.removeprefix(root) for p in paths if p.startswith(root)} - set(written))
    if new:
        write_record(out, {**record, "written": written + new})
