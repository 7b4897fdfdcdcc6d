"""Which tensor values the training loop reads back to the host: a recorder over ``torch.Tensor``'s
read-back methods, for the tests that the loop waits on the device only when it must."""

from __future__ import annotations

import contextlib

import torch

READS = ("item", "cpu", "tolist", "numpy", "__int__", "__float__", "__bool__", "__index__")


@contextlib.contextmanager
def reads_recorded(where: list):
    """Record (``where[0]``, method) for every call of a read-back method of ``torch.Tensor`` in the block."""
    calls, originals = [], {name: getattr(torch.Tensor, name) for name in READS}

    def recording(name, method):
        def read(self, *args, **kwargs):
            calls.append((where[0], name))
            return method(self, *args, **kwargs)

        return read

    for name, method in originals.items():
        setattr(torch.Tensor, name, recording(name, method))
    try:
        yield calls
    finally:
        for name, method in originals.items():
            setattr(torch.Tensor, name, method)
