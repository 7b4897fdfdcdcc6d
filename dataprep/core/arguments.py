"""Value types for command-line flags, shared by ``dataprep`` and ``pretrain``: a bad number is a usage
error naming the flag (argparse's exit status 2) before any work starts, not a library's traceback later."""

from __future__ import annotations

import argparse
import math


def _number(kind, text: str):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def _checked(kind, text: str, ok, must: str):
    value = _number(kind, text)
    if not ok(value):
        raise argparse.ArgumentTypeError(f"{value} {must}")
    return value


def positive_int(text: str) -> int:
    return _checked(int, text, lambda v: v > 0, "must be positive")


def whole_number(text: str) -> int:
    """An integer, also written as a float (``2.5e9``, ``1e6``)."""
    try:
        return int(text)
    except ValueError:
        value = _number(float, text)
        if not value.is_integer():
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        return int(value)


def non_negative_int(text: str) -> int:
    return _checked(int, text, lambda v: v >= 0, "must be 0 or more")


def positive_float(text: str) -> float:
    return _checked(float, text, lambda v: v > 0, "must be positive")


def fraction(text: str) -> float:
    """A share in [0, 1)."""
    return _checked(float, text, lambda v: 0 <= v < 1, "must be at least 0 and below 1")


def spark_master(text: str) -> str:
    from dataprep.core.config import SPARK_MASTER

    if not SPARK_MASTER.match(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a Spark master: local, local[N], local[*], spark://HOST:PORT, yarn or k8s://URL"
        )
    return text


def _writable(text: str, folder: bool) -> str:
    from dataprep.core.storage import check_output_path

    try:
        check_output_path(text, "", folder)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).strip()) from None
    return text


def output_folder(text: str) -> str:
    """A folder a command writes: it may not exist yet, but no file may stand where it or a parent goes."""
    return _writable(text, folder=True)


def output_file(text: str) -> str:
    """A file a command writes: not a folder, and no file where one of its parent folders goes."""
    return _writable(text, folder=False)
