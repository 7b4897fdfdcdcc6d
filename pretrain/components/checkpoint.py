"""Checkpoints: a run's state through one protocol, torch's ``Stateful`` (``state_dict`` /
``load_state_dict``), written by ``save`` and restored by ``load``, in two parts:

- ``ModelOptimizerState``: the model's and optimizer's tensors, sharded over the ranks, through
  ``torch.distributed.checkpoint`` (DCP): every rank writes its shards, by parameter name, so a run may
  resume at another parallel layout;
- ``TrainState``: the step, what identifies the run and the small components (scheduler, loader, fp16
  scaler), the same on every rank: ``train_state.json``, written by rank 0 and readable without DCP
  (export and inference read the model config from it).

Layout: ``DIR/step-00001000/`` holding DCP's ``.metadata`` and ``*.distcp``, ``train_state.json`` and
``rng-<rank>.pt`` (each rank's random generators). A checkpoint is written under ``DIR/.tmp-step-...``
and renamed into place only when every rank has finished, so any ``step-*`` directory is complete; the
oldest are removed beyond ``keep_last``. Nothing is unpickled freely (``pretrain.components.safe_reader``).
The directory must be on a file system every node sees. ``read_model_weights`` reads a checkpoint's
full model in one process (inference and export use it).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_state_dict,
    set_state_dict,
)
from torch.distributed.checkpoint.stateful import Stateful

from dataprep.core.storage import atomic_write_text
from pretrain.components.safe_reader import SafeLoadPlanner, SafeReader
from pretrain.distributed.parallel_dims import barrier, global_rank

STEP_DIR = re.compile(r"^step-(\d{8})$")
STATE_FILE = "train_state.json"
# optimizer state keyed by parameter name, hyper-parameters included: every rank's entries are its own, so
# a checkpoint resumes at another pipeline split (the nested form keeps one rank's param_groups list)
FLAT_OPTIM = StateDictOptions(flatten_optimizer_state_dict=True)
NESTED_PARAMS = re.compile(r"^optim\.param_groups\.\d+\.params$")


class CheckpointError(ValueError):
    """A checkpoint that is missing, incomplete, corrupt or incompatible; the message says which."""


class ModelOptimizerState:
    """The model's and optimizer's tensors as one ``Stateful``: this rank's shards, keyed by parameter
    name. (One object, not two: torch gathers and sets both state dicts together.)"""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer):
        self.model, self.optimizer = model, optimizer

    def state_dict(self, flat_optimizer: bool = True) -> dict:
        """``flat_optimizer`` False: the nested optimizer form of checkpoints written before the flat one."""
        model_sd, optim_sd = get_state_dict(self.model, self.optimizer, options=FLAT_OPTIM if flat_optimizer else None)
        return {"model": model_sd, "optim": optim_sd}

    def load_state_dict(self, state: Mapping) -> None:
        options = None if "param_groups" in state["optim"] else FLAT_OPTIM
        set_state_dict(self.model, self.optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"],
                       options=options)


@dataclass
class TrainState:
    """The small part of a checkpoint (``train_state.json``): the step, what identifies the run (model
    config, data fingerprint, parallel degrees) and each component's state under its name (None for one
    this run lacks, such as the fp16 scaler). Resuming refuses another model and warns when the data differ."""

    step: int
    model_config: dict
    data: dict
    parallel: dict
    components: dict[str, Stateful | None]

    def state_dict(self) -> dict:
        own = {"step": self.step, "data": self.data, "model_config": self.model_config, "parallel": self.parallel}
        return own | {name: c.state_dict() if c is not None else None for name, c in self.components.items()}

    def load_state_dict(self, state: dict) -> None:
        if state.get("model_config") != self.model_config:
            raise CheckpointError("it was trained with another model config")
        for name, component in self.components.items():
            if name not in state:
                raise CheckpointError(f"{STATE_FILE} lacks {name}")
            if component is not None and state[name] is not None:
                component.load_state_dict(state[name])
        if state.get("data") != self.data:
            warnings.warn(f"the training data differ from those of the checkpoint at step {state['step']}: "
                          "the sample order changes")
        self.step = int(state["step"])


# --- finding checkpoints ------------------------------------------------------------------------------


def list_checkpoints(root: str) -> list[str]:
    """Complete checkpoints under ``root``, oldest first."""
    if not os.path.isdir(root):
        return []
    names = sorted(n for n in os.listdir(root) if STEP_DIR.match(n))
    return [os.path.join(root, n) for n in names]


def resolve(resume: str | None, root: str) -> str | None:
    """``--resume`` value -> checkpoint directory: None/"none" = start fresh; "auto" = the latest under
    ``root`` if any; otherwise a path that must be a checkpoint."""
    if resume in (None, "", "none"):
        return None
    if resume == "auto":
        found = list_checkpoints(root)
        return found[-1] if found else None
    if not os.path.isdir(resume):
        raise CheckpointError(f"checkpoint {resume!r} does not exist")
    return resume


def _check_complete(path: str) -> dict:
    """Check the files a checkpoint needs and read its train state and DCP metadata (so a damaged
    checkpoint fails here, with its name, rather than deep inside a collective)."""
    for name in (".metadata", STATE_FILE):
        if not os.path.isfile(os.path.join(path, name)):
            raise CheckpointError(f"checkpoint {path} is incomplete: {name} is missing")
    try:
        with open(os.path.join(path, STATE_FILE), encoding="utf-8") as fh:
            state = json.load(fh)
    except (OSError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"checkpoint {path}: {STATE_FILE} is unreadable: {exc}") from None
    try:
        SafeReader(path).read_metadata()
    except Exception as exc:
        raise CheckpointError(f"checkpoint {path}: .metadata is unreadable: {exc}") from None
    return state


def _reason(exc: BaseException) -> str:
    """The underlying error of a DCP failure, in one line."""
    if isinstance(exc, dcp.CheckpointException) and exc.failures:
        exc = next(iter(exc.failures.values()))[0]
    return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"


# --- RNG ------------------------------------------------------------------------------------------


def rng_state() -> dict:
    state = {
        "torch": torch.get_rng_state(),
        "python": list(random.getstate()[1]),
        "numpy": torch.from_numpy(np.random.get_state()[1].astype(np.int64)),
        "numpy_pos": int(np.random.get_state()[2]),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate((3, tuple(state["python"]), None))
    np.random.set_state(("MT19937", state["numpy"].numpy().astype(np.uint32), state["numpy_pos"], 0, 0.0))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def _restore_rng(path: str) -> None:
    rng_file = os.path.join(path, f"rng-{global_rank()}.pt")
    if not os.path.exists(rng_file):  # absent when resuming on more ranks than the checkpoint had
        return
    try:
        set_rng_state(torch.load(rng_file, weights_only=True))
    except Exception as exc:
        raise CheckpointError(f"checkpoint {path}: {os.path.basename(rng_file)} is unreadable: {exc}") from exc


# --- save / load ---------------------------------------------------------------------------------------


def save(root: str, sharded: ModelOptimizerState, train_state: TrainState, keep_last: int) -> str:
    """Write checkpoint ``root/step-NNNNNNNN`` of the train state's step from every rank (collective);
    returns its path."""
    state = train_state.state_dict()
    final = os.path.join(root, f"step-{train_state.step:08d}")
    tmp = os.path.join(root, f".tmp-step-{train_state.step:08d}")
    rank = global_rank()
    if rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)  # left over from a crash during an earlier save
        os.makedirs(tmp)
    barrier()
    dcp.save(sharded.state_dict(), checkpoint_id=tmp)
    torch.save(rng_state(), os.path.join(tmp, f"rng-{rank}.pt"))  # the whole directory is renamed at the end
    barrier()
    if rank == 0:
        atomic_write_text(os.path.join(tmp, STATE_FILE), json.dumps(state, indent=1))
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        for old in list_checkpoints(root)[:-keep_last]:
            shutil.rmtree(old, ignore_errors=True)
    barrier()
    return final


def load(path: str, sharded: ModelOptimizerState, train_state: TrainState) -> None:
    """Restore the train state, then the model's and optimizer's shards and this rank's RNG, from ``path``
    (collective). Raises CheckpointError, naming the checkpoint, when it is missing, incomplete, corrupt or
    from another run."""
    state = _check_complete(path)
    try:
        train_state.load_state_dict(state)
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"checkpoint {path}: {exc}") from None
    # checkpoints written before the flat optimizer state list each group's parameters ("...params")
    nested = any(NESTED_PARAMS.match(key) for key in SafeReader(path).read_metadata().state_dict_metadata)
    target = sharded.state_dict(flat_optimizer=not nested)
    try:
        dcp.load(target, storage_reader=SafeReader(path), planner=SafeLoadPlanner())
    except (Exception, dcp.CheckpointException) as exc:  # CheckpointException is a BaseException
        raise CheckpointError(f"checkpoint {path} is corrupt or does not match the model: {_reason(exc)}") from None
    sharded.load_state_dict(target)
    _restore_rng(path)


# --- whole-model weights (inference, export) -------------------------------------------------------


def read_model_weights(ckpt: str) -> tuple[dict[str, torch.Tensor], dict]:
    """A checkpoint's full model tensors (our parameter names) and its train state, read in one process
    without building the model: sizes and dtypes come from DCP's metadata."""
    state = _check_complete(ckpt)
    reader = SafeReader(ckpt)
    meta = reader.read_metadata()
    weights = {
        fqn.removeprefix("model."): torch.empty(m.size, dtype=m.properties.dtype)
        for fqn, m in meta.state_dict_metadata.items()
        if fqn.startswith("model.") and hasattr(m, "size")
    }
    try:
        with warnings.catch_warnings():  # "assuming the intent is to load in a single process": it is
            warnings.filterwarnings("ignore", message=".*single process", category=UserWarning)
            dcp.load({"model": weights}, storage_reader=reader, planner=SafeLoadPlanner(), no_dist=True)
    except (Exception, dcp.CheckpointException) as exc:
        raise CheckpointError(f"checkpoint {ckpt} is corrupt: {_reason(exc)}") from None
    return weights, state
