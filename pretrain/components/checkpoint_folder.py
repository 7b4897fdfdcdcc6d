"""A run's checkpoint folder on disk: which checkpoints it holds, which are kept, and which one a run resumes from.

Layout: ``DIR/step-00001000/`` holding DCP's ``.metadata`` and ``*.distcp``, ``train_state.json`` and
``rng-<rank>.pt`` (pretrain/components/checkpoint.py writes them). Any ``step-*`` directory that lacks
``.metadata`` or ``train_state.json`` (copied in by hand or cut short by a file system) is passed over. The
oldest are removed beyond ``keep_last``, except those ``pin`` marks (the last checkpoint before a loss spike)
and the one ``mark_best`` marks (the lowest validation loss, ``checkpoint.keep_best``). Reading the folder needs
no torch.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import warnings

from dataprep.core.errors import UsageError
from dataprep.core.storage import atomic_write_text

STEP_DIR = re.compile(r"^step-(\d{8})$")
STATE_FILE = "train_state.json"
PIN_FILE = "pinned.json"  # a checkpoint kept beyond keep_last, and why
BEST_FILE = "best.json"  # the checkpoint of the lowest validation loss (checkpoint.keep_best), kept too


class CheckpointError(UsageError):
    """A checkpoint that is missing, incomplete, corrupt or incompatible; the message says which."""


def is_complete(path: str) -> bool:
    """Whether a checkpoint directory holds what a save writes last: DCP's metadata and the train state."""
    return all(os.path.isfile(os.path.join(path, name)) for name in (".metadata", STATE_FILE))


def list_checkpoints(root: str) -> list[str]:
    """Complete checkpoints under ``root``, oldest first."""
    if not os.path.isdir(root):
        return []
    names = sorted(n for n in os.listdir(root) if STEP_DIR.match(n))
    return [path for path in (os.path.join(root, n) for n in names) if is_complete(path)]


def checkpoint_step(path: str) -> int:
    return int(STEP_DIR.match(os.path.basename(path)).group(1))


def latest_before(root: str, step: int) -> str | None:
    """The newest complete checkpoint under ``root`` taken before ``step``, if any."""
    found = [path for path in list_checkpoints(root) if checkpoint_step(path) < step]
    return found[-1] if found else None


def pin(path: str, reason: str) -> None:
    """Keep checkpoint ``path`` whatever ``keep_last`` says (rank 0)."""
    atomic_write_text(os.path.join(path, PIN_FILE), json.dumps({"reason": reason}) + "\n")


def mark_best(path: str, val_loss: float, keep_last: int) -> None:
    """Make checkpoint ``path`` the run's best (rank 0): it is kept, and the previous best goes back to
    ``keep_last``'s rotation."""
    atomic_write_text(
        os.path.join(path, BEST_FILE), json.dumps({"step": checkpoint_step(path), "val_loss": val_loss}) + "\n"
    )
    for other in list_checkpoints(os.path.dirname(path)):
        if other != path and os.path.exists(os.path.join(other, BEST_FILE)):
            os.remove(os.path.join(other, BEST_FILE))
    prune(os.path.dirname(path), keep_last)


def find_best(root: str) -> str | None:
    """The checkpoint ``mark_best`` marked under ``root``, if any (the newest, should a crash leave two)."""
    marked = [path for path in list_checkpoints(root) if os.path.exists(os.path.join(path, BEST_FILE))]
    return marked[-1] if marked else None


def prune(root: str, keep_last: int) -> None:
    for old in list_checkpoints(root)[:-keep_last]:
        if not any(os.path.exists(os.path.join(old, name)) for name in (PIN_FILE, BEST_FILE)):
            shutil.rmtree(old, ignore_errors=True)


RESUME_NEWEST = ("auto", "latest-intact")  # --resume values that find the checkpoint under the run's folder


def resolve(resume: str | None, root: str) -> str | None:
    """``--resume`` value -> checkpoint directory: None/"none" = start fresh; "auto" or "latest-intact" =
    the latest complete one under ``root`` if any (``load_newest`` then loads it, or an older one);
    otherwise a path that must be a checkpoint."""
    if resume in (None, "", "none"):
        return None
    if resume in RESUME_NEWEST:
        found = list_checkpoints(root)
        latest = os.path.basename(found[-1]) if found else ""
        newer = sorted(n for n in os.listdir(root) if STEP_DIR.match(n) and n > latest) if os.path.isdir(root) else []
        if newer:  # a save cut short outside our rename: copied by hand, or a file system that lost files
            warnings.warn(
                f"passed over incomplete checkpoint(s) {', '.join(newer)} in {root}: they lack .metadata "
                f"or {STATE_FILE}"
            )
        return found[-1] if found else None
    if not os.path.isdir(resume):
        raise CheckpointError(f"checkpoint {resume!r} does not exist")
    return resume
