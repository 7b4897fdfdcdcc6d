"""Reading DCP checkpoints without unpickling arbitrary objects: a checkpoint may come from anywhere, and
a pickle can run code. DCP's ``.metadata`` goes through an unpickler that allows only the classes DCP
writes there; its non-tensor values (optimizer hyper-parameters) through ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import enum
import io
import os
import pickle

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner


class _MetadataUnpickler(pickle.Unpickler):
    """Unpickles DCP's ``.metadata`` allowing only the classes DCP writes there."""

    _ALLOWED_MODULES = ("torch.distributed.checkpoint.", "torch.distributed.tensor.")
    _ALLOWED = {
        ("torch", "Size"),
        ("torch.serialization", "_get_layout"),
        ("collections", "OrderedDict"),
        ("pathlib", "PosixPath"),
        ("pathlib", "WindowsPath"),
        ("pathlib", "PurePosixPath"),
    }

    def find_class(self, module: str, name: str):
        if (module, name) == ("builtins", "getattr"):  # how some Python versions pickle an enum member
            return _enum_member
        if (
            module.startswith(self._ALLOWED_MODULES)
            or (module, name) in self._ALLOWED
            or (module == "torch" and isinstance(getattr(torch, name, None), torch.dtype))
        ):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from checkpoint metadata")


def _enum_member(cls, name: str):
    """``getattr`` as the metadata unpickler allows it: a member of an enum class it already allowed, by name."""
    if isinstance(cls, type) and issubclass(cls, enum.Enum) and name in cls.__members__:
        return cls[name]
    raise pickle.UnpicklingError(
        f"refusing to load getattr({getattr(cls, '__name__', cls)!r}, {name!r}) from checkpoint metadata"
    )


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
