"""The whole model as one safetensors file, written one tensor at a time: gathered from the shards during
training (``export_model``) or read from a checkpoint in one process (``export_checkpoint``).
``safetensors.torch.save_file`` needs every tensor in memory and then copies them all into one buffer
(two full copies of a model); the format (an 8-byte header length, a JSON header, the raw little-endian
data) lets ``write_safetensors`` stream instead.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable, Mapping

import torch

from dataprep.core.storage import atomic_output
from pretrain.components.checkpoint import read_model_weights
from pretrain.distributed.process_group import barrier, global_rank

_SAFETENSORS_DTYPES = {
    torch.float64: "F64",
    torch.float32: "F32",
    torch.float16: "F16",
    torch.bfloat16: "BF16",
    torch.int64: "I64",
    torch.int32: "I32",
    torch.int16: "I16",
    torch.int8: "I8",
    torch.uint8: "U8",
    torch.bool: "BOOL",
}


def write_safetensors(
    path: str,
    tensors: Mapping[str, torch.Tensor],
    metadata: dict | None = None,
    *,
    dtype: torch.dtype | None = None,
    materialise: Callable | None = None,
) -> None:
    """Write ``tensors`` (converted to ``dtype`` if given) as a safetensors file, atomically and one tensor
    at a time: ``materialise`` (e.g. gathering a DTensor) is called on each just before it is written."""
    header, offset = {}, 0
    for name, t in tensors.items():
        kind = dtype or t.dtype
        if kind not in _SAFETENSORS_DTYPES:
            raise ValueError(f"safetensors cannot hold {name} of dtype {kind}")
        size = math.prod(t.shape) * kind.itemsize
        header[name] = {
            "dtype": _SAFETENSORS_DTYPES[kind],
            "shape": list(t.shape),
            "data_offsets": [offset, offset + size],
        }
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
    if global_rank() == 0:
        write_safetensors(path, state, metadata, materialise=_full_tensor)
    else:
        for t in state.values():  # every rank takes part in each gather
            _full_tensor(t)
    barrier()


def export_checkpoint(ckpt: str, path: str) -> dict[str, torch.Tensor]:
    """Convert a checkpoint's model weights to one safetensors file, in one process without the model.
    Returns the tensors."""
    weights, state = read_model_weights(ckpt)
    write_safetensors(path, weights, {"step": state["step"], "model_config": json.dumps(state.get("model_config"))})
    return weights
