"""Checkpoint metadata is read without unpickling arbitrary objects, whichever Python wrote it: some Python
versions pickle an enum member as ``getattr(EnumClass, name)``, and that must read, while ``getattr`` on
anything else stays refused."""

from __future__ import annotations

import enum
import pickle

import pytest
import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.metadata import _MEM_FORMAT_ENCODING, Metadata

from pretrain.components.safe_reader import SafeReader


class _EnumsByName(pickle.Pickler):
    """Pickles enum members the way those Python versions do."""

    def reducer_override(self, obj):
        if isinstance(obj, enum.Enum):
            return getattr, (type(obj), obj.name)
        return NotImplemented


class _GetattrOf:
    def __init__(self, target, name):
        self.target, self.name = target, name

    def __reduce__(self):
        return getattr, (self.target, self.name)


@pytest.fixture
def saved(tmp_path):
    """A real DCP checkpoint of a small state dict."""
    dcp.save({"w": torch.arange(6.0).reshape(2, 3)}, checkpoint_id=str(tmp_path), no_dist=True)
    return tmp_path


def test_metadata_with_enums_pickled_by_name_reads(saved):
    expected = SafeReader(str(saved)).read_metadata()
    metadata = pickle.loads((saved / ".metadata").read_bytes())
    with open(saved / ".metadata", "wb") as fh:
        _EnumsByName(fh).dump(metadata)
    assert b"getattr" in (saved / ".metadata").read_bytes()
    assert SafeReader(str(saved)).read_metadata().state_dict_metadata == expected.state_dict_metadata


@pytest.mark.parametrize(
    "target, name",
    [(torch.Size, "__subclasses__"), (Metadata, "__init__"), (_MEM_FORMAT_ENCODING, "__class__")],
    ids=["other class", "allowed class", "enum, not a member"],
)
def test_metadata_getattr_of_anything_but_an_enum_member_is_refused(saved, target, name):
    with open(saved / ".metadata", "wb") as fh:
        pickle.dump(_GetattrOf(target, name), fh)
    with pytest.raises(pickle.UnpicklingError, match="refusing to load"):
        SafeReader(str(saved)).read_metadata()
