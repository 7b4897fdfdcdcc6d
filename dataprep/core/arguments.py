"""Value types for command-line flags, shared by ``dataprep`` and ``pretrain``: a bad number is a usage
error naming the flag (argparse's exit status 2) before any work starts, not a library's traceback later."""

from __future__ import annotations

import argparse
import math
import os


def _number(kind, text: str):
    try:
        value = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def positive_int(text: str) -> int:
    value = _number(int, text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} must be positive")
    return value


def non_negative_int(text: str) -> int:
    value = _number(int, text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} must be 0 or more")
    return value


def positive_float(text: str) -> float:
    value = _number(float, text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} must be positive")
    return value


def fraction(text: str) -> float:
    """A share in [0, 1)."""
    value = _number(float, text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 0 and below 1")
    return value


def spark_master(text: str) -> str:
    from dataprep.core.config import SPARK_MASTER

    if not SPARK_MASTER.match(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a Spark master: local, local[N], local[*], spark://HOST:PORT, yarn or k8s://URL")
    return text


def _file_in_the_way(path: str) -> str | None:
    """The file at ``path`` or above it that keeps a folder from being made there, if any (local paths)."""
    if "://" in path and not path.startswith("file://"):
        return None
    here = os.path.abspath(path.removeprefix("file://"))
    while here and not os.path.exists(here):
        here = os.path.dirname(here)
    return here if here and os.path.exists(here) and not os.path.isdir(here) else None


def output_folder(text: str) -> str:
    """A folder a command writes: it may not exist yet, but no file may stand where it or a parent goes."""
    blocker = _file_in_the_way(text)
    if blocker:
        raise argparse.ArgumentTypeError(f"{text!r}: {blocker!r} is a file, not a folder")
    return text


def output_file(text: str) -> str:
    """A file a command writes: not a folder, and no file where one of its parent folders goes."""
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} is a folder; name the file to write")
    blocker = _file_in_the_way(os.path.dirname(text) or ".")
    if blocker:
        raise argparse.ArgumentTypeError(f"{text!r}: {blocker!r} is a file, not a folder")
    return text
