"""Mixture presets: each source's token-shard folder and weight, by name (``configs/mixture/``) or path.

A training config takes one as ``data: {mixture: llama1}``; it becomes ``data.sources``, the list the
loader mixes by token weight (the order itself: pretrain/components/mixture_order.py), and the file's ``phases:``
(if any) ``data.phases``. A local source that has not been built yet is refused by name before any step, naming
the pipeline preset that builds it.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from dataprep.core.validation import ConfigError

PRESET_DIR = Path(__file__).resolve().parent / "configs" / "mixture"  # ships in the package


def presets() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def find_mixture(spec: str) -> str | None:
    """A mixture file: ``spec`` as a path, else a shipped preset's name (``llama1``); None when neither."""
    if os.path.isfile(spec):
        return spec
    named = PRESET_DIR / f"{Path(spec).stem}.yaml"
    return str(named) if os.path.sep not in spec and named.is_file() else None


def load_mixture(spec: str) -> list[dict]:
    """The sources of mixture ``spec`` (a preset name or a YAML path), as ``data.sources`` entries."""
    return _read_mixture(spec)[0]


def load_mixture_phases(spec: str) -> list[dict] | None:
    """The ``phases:`` of mixture ``spec``, as ``data.phases`` entries; None when it has none."""
    return _read_mixture(spec)[1]


def _read_mixture(spec: str) -> tuple[list[dict], list[dict] | None]:
    path = find_mixture(spec)
    if path is None:
        raise ConfigError(f"mixture {spec!r} is neither a file nor a preset (presets: {', '.join(presets())})")
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh) or {}
    sources = data.get("sources") if isinstance(data, dict) else None
    if not isinstance(sources, list) or not sources or not all(isinstance(s, dict) for s in sources):
        raise ConfigError(f"{path}: expected `sources:`, a list of {{name, path, weight, preset}}")
    phases = data.get("phases")
    if phases is not None and (not isinstance(phases, list) or not all(isinstance(p, dict) for p in phases)):
        raise ConfigError(f"{path}: expected `phases:`, a list of {{until, weights}}")
    return sources, phases


def check_built(sources: list[dict]) -> None:
    """Refuse a local source folder that does not exist, naming the source and the preset that builds it."""
    from pretrain.components.remote_shards import is_remote

    for source in sources:
        path = source.get("path")
        if not isinstance(path, str) or is_remote(path) or os.path.exists(path):
            continue
        name = source.get("name") or path
        preset = source.get("preset")
        build = (
            f"build it with `dataprep run {preset} --input ...` (a tokenize stage writing shards to {path})"
            if preset
            else "build its token shards first, or fix the path"
        )
        raise ConfigError(f"data source {name!r}: token-shard folder {path} does not exist; {build}")
