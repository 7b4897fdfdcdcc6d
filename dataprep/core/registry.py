"""Stage names in configs -> stage classes.

A stage's one registration is its ``@register("name")`` decorator. The registry learns which module
defines which name by reading dataprep's sources for that decorator, so it imports a stage's module
only when a config names it; a stage whose optional dependency is missing says which package to
install instead of silently disappearing from the list.
"""

from __future__ import annotations

import importlib
import re
from functools import lru_cache
from pathlib import Path

from dataprep.core.extras import install_command

STAGES: dict[str, type] = {}  # registered so far (imported modules, and stages of other packages)

_DECORATOR = re.compile(r'^@register\(\s*"([A-Za-z0-9_]+)"', re.M)
_PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # dataprep/


class MissingDependency(ImportError):
    """A stage exists but a package it needs is not installed."""


def register(name: str):
    """Class decorator: make a stage available to configs under ``name``."""

    def wrap(cls):
        cls.name = name
        STAGES[name] = cls
        return cls

    return wrap


@lru_cache(maxsize=1)
def stage_modules() -> dict[str, str]:
    """Stage name -> the dataprep module that registers it, read from the sources without importing."""
    found: dict[str, str] = {}
    for path in sorted(_PACKAGE_ROOT.rglob("*.py")):
        names = _DECORATOR.findall(path.read_text(encoding="utf-8", errors="replace"))
        module = ".".join(("dataprep", *path.relative_to(_PACKAGE_ROOT).with_suffix("").parts))
        for name in names:
            if name in found:
                raise RuntimeError(f"stage {name!r} is registered twice: {found[name]} and {module}")
            found[name] = module
    return found


def stage_names() -> list[str]:
    return sorted(set(stage_modules()) | set(STAGES))


def stage_class(name: str) -> type:
    """The class registered as ``name``, importing its module on first use. Raises KeyError for an
    unknown name and MissingDependency (naming the package to install) for an unusable one."""
    if name not in STAGES:
        module = stage_modules().get(name)
        if module is None:
            from dataprep.core.validation import did_you_mean

            raise KeyError(f"unknown stage {name!r}{did_you_mean(str(name), stage_names())} (known stages: {', '.join(stage_names())})")
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            missing = (exc.name or "").split(".")[0]
            if not missing or missing in ("dataprep", "pipelines"):
                raise
            raise MissingDependency(
                f"stage {name!r} needs the Python package {missing!r}, which is not installed: {install_command(missing)}"
            ) from exc
    return STAGES[name]
