"""What a run's input files looked like when a step read them, so a rerun notices a file that changed since
(appended to, rewritten) and redoes the steps instead of reusing output made from the old content.

A local file is known by its size and modification time; a folder (a code input) by its files' count,
total size and latest modification time. Remote objects are known by name only (Common Crawl's files
never change; an object store's listing costs a request per file).
"""

from __future__ import annotations

import os
import time

from dataprep.core.storage import is_url


def input_state(files: list[str]) -> dict[str, list[int]]:
    """``{path: [size, mtime_ns]}`` (a folder: ``[size, mtime_ns, files]``) for each local input."""
    state = {}
    for path in files:
        if is_url(path):
            continue
        local = path.removeprefix("file://")
        try:
            state[path] = _folder_state(local) if os.path.isdir(local) else _file_state(local)
        except OSError:
            continue  # unreadable: the reader counts it
    return state


def _file_state(path: str) -> list[int]:
    info = os.stat(path)
    return [info.st_size, info.st_mtime_ns]


def _folder_state(path: str) -> list[int]:
    size = latest = count = 0
    for folder, _, names in os.walk(path):
        for name in names:
            try:
                info = os.lstat(os.path.join(folder, name))
            except OSError:
                continue
            size, latest, count = size + info.st_size, max(latest, info.st_mtime_ns), count + 1
    return [size, latest, count]


def describe_changes(before: dict[str, list[int]], after: dict[str, list[int]], shown: int = 3) -> str | None:
    """What changed between two ``input_state``s, for people; None when nothing did."""
    changed = [path for path in after if path in before and before[path] != after[path]]
    if not changed:
        return None
    parts = [f"{path} ({_change(before[path], after[path])})" for path in changed[:shown]]
    more = f" and {len(changed) - shown} more" if len(changed) > shown else ""
    return f"{len(changed)} input{'s' * (len(changed) != 1)} changed since the last run: {', '.join(parts)}{more}"


def _change(old: list[int], new: list[int]) -> str:
    said = []
    if len(old) == len(new) == 3 and old[2] != new[2]:
        said.append(f"{old[2]:,} -> {new[2]:,} files")
    if old[0] != new[0]:
        said.append(f"{old[0]:,} -> {new[0]:,} bytes")
    if old[1] != new[1]:
        said.append(f"modified {_when(new[1])}, was {_when(old[1])}")
    return "; ".join(said)


def _when(mtime_ns: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(mtime_ns // 10**9)) + f".{mtime_ns // 10**6 % 1000:03d} UTC"
