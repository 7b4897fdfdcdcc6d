"""Checkpoints: a run's state through one protocol, torch's ``Stateful`` (``state_dict`` /
``load_state_dict``), written by ``save`` and restored by ``load``, in two parts:

- ``ModelOptimizerState``: the model's and optimizer's tensors, sharded over the ranks, through
  ``torch.distributed.checkpoint`` (DCP): every rank writes its shards, by parameter name, so a run may
  resume at another parallel layout;
- ``TrainState``: the step, what identifies the run and the small components (scheduler, loader, fp16
  scaler), the same on every rank: ``train_state.json``, written by rank 0 and readable without DCP
  (export and inference read the model config from it).

Each rank also writes its random generators (``rng-<rank>.pt``). A checkpoint is written under
``DIR/.tmp-step-...`` and renamed into place only when every rank has finished, so any ``step-*`` directory
is complete; the folder's layout, and which checkpoints are kept, are in pretrain/components/checkpoint_folder.py.
``AsyncSaver`` writes the same layout in the background (``checkpoint.async_save``).
Nothing is unpickled freely (``pretrain.components.safe_reader``).
The directory must be on a file system every node sees. ``read_model_weights`` reads a checkpoint's
full model in one process (inference and export use it).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import warnings
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_state_dict,
    set_state_dict,
)
from torch.distributed.checkpoint.stateful import Stateful

from dataprep.core.storage import atomic_write_text
from pretrain.components.checkpoint_folder import STATE_FILE, CheckpointError, list_checkpoints, prune
from pretrain.components.safe_reader import SafeLoadPlanner, SafeReader
from pretrain.distributed.process_group import barrier, global_rank

# optimizer state keyed by parameter name, hyper-parameters included: every rank's entries are its own, so
# a checkpoint resumes at another pipeline split (the nested form keeps one rank's param_groups list)
FLAT_OPTIM = StateDictOptions(flatten_optimizer_state_dict=True)


# DCP's note on every save and load without a process group (one-process training, export, inference):
# that is what we mean, so it is no news to the user.
warnings.filterwarnings(
    "ignore",
    category=UserWarning,
    message="torch.distributed is disabled, unavailable or uninitialized, assuming the intent is to "
    "(save|load) in a single process",
)


class ModelOptimizerState:
    """The model's and optimizer's tensors as one ``Stateful``: this rank's shards, keyed by parameter
    name. (One object, not two: torch gathers and sets both state dicts together.)"""

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer):
        self.model, self.optimizer = model, optimizer

    def state_dict(self) -> dict:
        if _is_zero1(self.optimizer):  # this rank's share of the optimizer, in the same flat form
            from torch.distributed.checkpoint.state_dict import get_model_state_dict

            from pretrain.distributed import zero1

            own = zero1.zero1_state_dict if self.optimizer.optim.state else zero1.zero1_load_target
            return {"model": get_model_state_dict(self.model), "optim": own(self.model, self.optimizer)}
        model_sd, optim_sd = get_state_dict(self.model, self.optimizer, options=FLAT_OPTIM)
        return {"model": model_sd, "optim": optim_sd}

    def load_state_dict(self, state: Mapping) -> None:
        if _is_zero1(self.optimizer):
            from torch.distributed.checkpoint.state_dict import set_model_state_dict

            from pretrain.distributed.zero1 import load_zero1_state_dict

            set_model_state_dict(self.model, state["model"])
            load_zero1_state_dict(self.model, self.optimizer, state["optim"])
            return
        set_state_dict(
            self.model,
            self.optimizer,
            model_state_dict=state["model"],
            optim_state_dict=state["optim"],
            options=FLAT_OPTIM,
        )


def _is_zero1(optimizer) -> bool:
    return type(optimizer).__name__ == "ZeroRedundancyOptimizer"


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
                if getattr(component, "optional", False):  # a component newer than the checkpoint
                    continue
                raise CheckpointError(f"{STATE_FILE} lacks {name}")
            if component is not None and state[name] is not None:
                component.load_state_dict(state[name])
        if state.get("data") != self.data:
            warnings.warn(
                f"the training data differ from those of the checkpoint at step {state['step']}: "
                "the sample order changes"
            )
        self.step = int(state["step"])


# --- reading a checkpoint --------------------------------------------------------------------------


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


def _prepare(root: str, step: int) -> tuple[str, str]:
    """The temporary and final directories of the checkpoint at ``step``; the temporary one made afresh
    (collective)."""
    final = os.path.join(root, f"step-{step:08d}")
    tmp = os.path.join(root, f".tmp-step-{step:08d}")
    if global_rank() == 0:
        shutil.rmtree(tmp, ignore_errors=True)  # left over from a crash during an earlier save
        os.makedirs(tmp)
    barrier()
    torch.save(rng_state(), os.path.join(tmp, f"rng-{global_rank()}.pt"))  # the whole directory is renamed at the end
    return tmp, final


def _commit(tmp: str, final: str, state: dict, keep_last: int) -> None:
    """Rank 0, once every rank's shards are written: the train state, the rename that makes the
    checkpoint visible, and the pruning of old ones."""
    atomic_write_text(os.path.join(tmp, STATE_FILE), json.dumps(state, indent=1))
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    prune(os.path.dirname(final), keep_last)


def save(root: str, sharded: ModelOptimizerState, train_state: TrainState, keep_last: int) -> str:
    """Write checkpoint ``root/step-NNNNNNNN`` of the train state's step from every rank (collective);
    returns its path."""
    state = train_state.state_dict()
    tmp, final = _prepare(root, train_state.step)
    dcp.save(sharded.state_dict(), checkpoint_id=tmp)
    barrier()
    if global_rank() == 0:
        _commit(tmp, final, state, keep_last)
    barrier()
    return final


class AsyncSaver:
    """Checkpoints written in the background, one at a time: ``save`` blocks while the state is copied to
    host memory (DCP's ``async_save``, which writes from a thread), then returns; a second thread on rank 0
    commits the checkpoint (train state, rename) once DCP's last collective says every rank has written.
    DCP's collectives run over a gloo group of their own, apart from training's. A crash before the commit
    leaves only a ``.tmp-step-*`` directory, which nothing reads: the previous checkpoint stays the latest."""

    def __init__(self):
        self.group = dist.new_group(backend="gloo") if dist.is_initialized() else None  # collective
        self.committer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint-commit")
        self.pending: Future | None = None

    def save(self, root: str, sharded: ModelOptimizerState, train_state: TrainState, keep_last: int) -> str:
        """Start writing checkpoint ``root/step-NNNNNNNN`` (collective; waits for the previous one first)."""
        self.wait()
        state = train_state.state_dict()
        tmp, final = _prepare(root, train_state.step)
        written = dcp.async_save(sharded.state_dict(), checkpoint_id=tmp, process_group=self.group)
        self.pending = self.committer.submit(self._finish, written, tmp, final, state, keep_last)
        return final

    @staticmethod
    def _finish(written: Future, tmp: str, final: str, state: dict, keep_last: int) -> None:
        written.result()  # on rank 0 this returns after every rank's shards are written
        if global_rank() == 0:
            _commit(tmp, final, state, keep_last)

    def wait(self) -> None:
        """Block until the checkpoint being written is committed (this rank's part of it); raises the
        error that stopped it, if any."""
        pending, self.pending = self.pending, None
        if pending is not None:
            pending.result()

    def close(self) -> None:
        try:
            self.wait()
        finally:
            self.committer.shutdown()


def load(path: str, sharded: ModelOptimizerState, train_state: TrainState) -> None:
    """Restore the train state, then the model's and optimizer's shards and this rank's RNG, from ``path``
    (collective). Raises CheckpointError, naming the checkpoint, when it is missing, incomplete, corrupt or
    from another run."""
    state = _check_complete(path)
    try:
        train_state.load_state_dict(state)
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"checkpoint {path}: {exc}") from None
    target = sharded.state_dict()
    try:
        dcp.load(target, storage_reader=SafeReader(path), planner=SafeLoadPlanner())
    except (Exception, dcp.CheckpointException) as exc:  # CheckpointException is a BaseException
        raise CheckpointError(f"checkpoint {path} is corrupt or does not match the model: {_reason(exc)}") from None
    sharded.load_state_dict(target)
    _restore_rng(path)


def load_newest(root: str, sharded: ModelOptimizerState, train_state: TrainState, skip_damaged: bool) -> str:
    """Load the newest checkpoint under ``root`` (collective) and return its path. When it does not load,
    the error names the newest one that does and the flag that resumes from it; with ``skip_damaged``
    (``--resume latest-intact``) the run resumes from that one, with a warning naming those passed over, so
    a requeued job does not fail the same way forever."""
    failed: list[CheckpointError] = []
    for path in reversed(list_checkpoints(root)):
        try:
            load(path, sharded, train_state)
        except CheckpointError as exc:
            failed.append(exc)
            continue
        if failed and not skip_damaged:
            raise CheckpointError(
                f"{failed[0]}\nthe newest checkpoint that loads is {path}: resume from it with "
                "--resume latest-intact (passes over newer ones that do not load) or "
                f"--resume {path}"
            )
        if failed:
            warnings.warn(
                f"resuming from {path}: passed over newer checkpoint(s) that do not load: "
                + "; ".join(map(str, failed))
            )
        return path
    raise CheckpointError(
        str(failed[0]) + (f"\nno older checkpoint under {root} loads either" if len(failed) > 1 else "")
    )


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
        dcp.load({"model": weights}, storage_reader=reader, planner=SafeLoadPlanner(), no_dist=True)
    except (Exception, dcp.CheckpointException) as exc:
        raise CheckpointError(f"checkpoint {ckpt} is corrupt: {_reason(exc)}") from None
    return weights, state
