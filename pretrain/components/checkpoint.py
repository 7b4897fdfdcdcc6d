"""Checkpoints: model and optimizer through ``torch.distributed.checkpoint`` (sharded, reshardable, so a
run may resume at another parallel layout), plus the small training state as JSON and per-rank RNG
states.

Layout: ``DIR/step-00001000/`` holding DCP's ``.metadata`` and ``*.distcp``, ``train_state.json`` (step,
scheduler, loader, configs) and ``rng-<rank>.pt``. A checkpoint is written under ``DIR/.tmp-step-...``
and renamed into place only when every rank has finished, so any ``step-*`` directory is complete; the
oldest are removed beyond ``keep_last``. Nothing is unpickled freely: DCP's metadata goes through an
allow-listed unpickler, its non-tensor values and our RNG files through ``torch.load(weights_only=True)``.
The directory must be on a file system every node sees. ``read_model_weights`` reads a checkpoint's
full model in one process (inference and export use it); ``export_model`` gathers it during training.
"""

from __future__ import annotations

import io
import json
import math
import os
import pickle
import random
import re
import shutil
import struct
import warnings
from collections.abc import Callable, Mapping

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_state_dict,
    set_state_dict,
)

from dataprep.core.storage import atomic_output, atomic_write_text

STEP_DIR = re.compile(r"^step-(\d{8})$")
STATE_FILE = "train_state.json"
# optimizer state keyed by parameter name, hyper-parameters included: every rank's entries are its own, so
# a checkpoint resumes at another pipeline split (the nested form keeps one rank's param_groups list)
FLAT_OPTIM = StateDictOptions(flatten_optimizer_state_dict=True)


class CheckpointError(ValueError):
    """A checkpoint that is missing, incomplete, corrupt or incompatible; the message says which."""


# --- safe reading -----------------------------------------------------------------------------------


class _MetadataUnpickler(pickle.Unpickler):
    """Unpickles DCP's ``.metadata`` allowing only the classes DCP writes there."""

    _ALLOWED_MODULES = ("torch.distributed.checkpoint.", "torch.distributed.tensor.")
    _ALLOWED = {("torch", "Size"), ("torch.serialization", "_get_layout"), ("collections", "OrderedDict"),
                ("pathlib", "PosixPath"), ("pathlib", "WindowsPath"), ("pathlib", "PurePosixPath")}

    def find_class(self, module: str, name: str):
        if module.startswith(self._ALLOWED_MODULES) or (module, name) in self._ALLOWED or (
            module == "torch" and isinstance(getattr(torch, name, None), torch.dtype)
        ):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from checkpoint metadata")


class SafeReader(dcp.FileSystemReader):
    def read_metadata(self, *args, **kwargs):
        rank = kwargs.get("rank")
        with open(os.path.join(self.path, ".metadata" if rank is None else f"__{rank}.metadata"), "rb") as fh:
            metadata = _MetadataUnpickler(fh).load()
        if getattr(metadata, "storage_meta", None) is None:
            from torch.distributed.checkpoint.metadata import StorageMeta

            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata


class SafeLoadPlanner(DefaultLoadPlanner):
    """DCP stores non-tensor values (optimizer hyper-parameters) with torch.save; read them without
    arbitrary unpickling."""

    def load_bytes(self, read_item, value: io.BytesIO) -> None:
        obj = torch.load(value, weights_only=True)
        if self.flatten_state_dict:
            from torch.distributed.checkpoint._traverse import set_element

            set_element(self.original_state_dict, self.mappings[read_item.dest_index.fqn], obj)
        else:
            self.state_dict[read_item.dest_index.fqn] = obj


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


# --- save / load ---------------------------------------------------------------------------------------


def _rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def _barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def save(root: str, step: int, model, optimizer, train_state: dict, keep_last: int) -> str:
    """Write checkpoint ``root/step-NNNNNNNN`` from every rank (collective); returns its path."""
    final = os.path.join(root, f"step-{step:08d}")
    tmp = os.path.join(root, f".tmp-step-{step:08d}")
    rank = _rank()
    if rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)  # left over from a crash during an earlier save
        os.makedirs(tmp)
    _barrier()
    model_sd, optim_sd = get_state_dict(model, optimizer, options=FLAT_OPTIM)
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=tmp)
    torch.save(rng_state(), os.path.join(tmp, f"rng-{rank}.pt"))  # the whole directory is renamed at the end
    _barrier()
    if rank == 0:
        atomic_write_text(os.path.join(tmp, STATE_FILE), json.dumps({"step": step, **train_state}, indent=1))
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        for old in list_checkpoints(root)[:-keep_last]:
            shutil.rmtree(old, ignore_errors=True)
    _barrier()
    return final


def load(path: str, model, optimizer) -> dict:
    """Restore model, optimizer and this rank's RNG from ``path`` (collective); returns the train state.
    Raises CheckpointError, naming the checkpoint, when it is missing, incomplete or corrupt."""
    state = _check_complete(path)
    # checkpoints written before the flat optimizer state hold one "optim.param_groups" entry
    nested = "optim.param_groups" in SafeReader(path).read_metadata().state_dict_metadata
    options = None if nested else FLAT_OPTIM
    model_sd, optim_sd = get_state_dict(model, optimizer, options=options)
    target = {"model": model_sd, "optim": optim_sd}
    try:
        dcp.load(target, storage_reader=SafeReader(path), planner=SafeLoadPlanner())
    except (Exception, dcp.CheckpointException) as exc:  # CheckpointException is a BaseException
        raise CheckpointError(f"checkpoint {path} is corrupt or does not match the model: {_reason(exc)}") from None
    set_state_dict(model, optimizer, model_state_dict=target["model"], optim_state_dict=target["optim"],
                   options=options)
    rng_file = os.path.join(path, f"rng-{_rank()}.pt")
    if os.path.exists(rng_file):  # absent when resuming on more ranks than the checkpoint had
        try:
            set_rng_state(torch.load(rng_file, weights_only=True))
        except Exception as exc:
            raise CheckpointError(f"checkpoint {path}: {os.path.basename(rng_file)} is unreadable: {exc}") from exc
    return state


# --- whole-model weights (inference, export) -------------------------------------------------------


_SAFETENSORS_DTYPES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
                      torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
                      torch.uint8: "U8", torch.bool: "BOOL"}


def write_safetensors(path: str, tensors: Mapping[str, torch.Tensor], metadata: dict | None = None, *,
                      dtype: torch.dtype | None = None, materialise: Callable | None = None) -> None:
    """Write ``tensors`` (converted to ``dtype`` if given) as a safetensors file, atomically and one tensor
    at a time: ``materialise`` (e.g. gathering a DTensor) is called on each just before it is written.
    ``safetensors.torch.save_file`` needs every tensor in memory and then copies them all into one
    buffer (two full copies of a model); the format (an 8-byte header length, a JSON header, the raw
    little-endian data) lets us stream instead."""
    header, offset = {}, 0
    for name, t in tensors.items():
        kind = dtype or t.dtype
        if kind not in _SAFETENSORS_DTYPES:
            raise ValueError(f"safetensors cannot hold {name} of dtype {kind}")
        size = math.prod(t.shape) * kind.itemsize
        header[name] = {"dtype": _SAFETENSORS_DTYPES[kind], "shape": list(t.shape), "data_offsets": [offset, offset + size]}
        offset += size
    if metadata:
        header = {"__metadata__": {k: str(v) for k, v in metadata.items()}, **header}
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)  # data starts 8-byte aligned, as safetensors writes it
    with atomic_output(path) as out, open(out, "wb") as fh:
        fh.write(struct.pack("<Q", len(head)) + head)
        for t in tensors.values():
            t = (materialise(t) if materialise else t).detach().to("cpu", dtype or t.dtype)
            fh.write(t.contiguous().reshape(-1).view(torch.uint8).numpy())


def _full_tensor(t: torch.Tensor) -> torch.Tensor:
    from torch.distributed.tensor import DTensor

    return t.full_tensor() if isinstance(t, DTensor) else t


def export_model(model, path: str, metadata: dict | None = None) -> None:
    """Gather the full model (collective), one tensor at a time, into one safetensors file written by rank
    0: no process holds more than one full tensor besides its own shards."""
    from pretrain.models.llama import parameter_name

    state = {parameter_name(k): v for k, v in model.state_dict().items()}
    if _rank() == 0:
        write_safetensors(path, state, metadata, materialise=_full_tensor)
    else:
        for t in state.values():  # every rank takes part in each gather
            _full_tensor(t)
    _barrier()


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


def export_checkpoint(ckpt: str, path: str) -> dict[str, torch.Tensor]:
    """Convert a checkpoint's model weights to one safetensors file, in one process without the model.
    Returns the tensors."""
    weights, state = read_model_weights(ckpt)
    write_safetensors(path, weights, {"step": state["step"], "model_config": json.dumps(state.get("model_config"))})
    return weights
