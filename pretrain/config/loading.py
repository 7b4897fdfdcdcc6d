"""Config files: a model or training config read from YAML (with ``--set`` overrides, a model file, a
mixture preset and the data's vocabulary filled in) and validated; a config written back."""

from __future__ import annotations

import os

import yaml
from pydantic import BaseModel, ValidationError

from dataprep.core.validation import ConfigError, apply_overrides, describe
from pretrain.config.data import check_sources
from pretrain.config.model import ModelConfig
from pretrain.config.train import TrainConfig


def _load_yaml(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh) or {}
    except FileNotFoundError:
        raise ConfigError(f"config file {path!r} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {path!r} is a folder: name a YAML file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file: name a YAML file") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', None) or exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping")
    return data


def load_model_config(path_or_dict: str | dict) -> ModelConfig:
    data = _load_yaml(path_or_dict) if isinstance(path_or_dict, str) else path_or_dict
    try:
        return ModelConfig.model_validate(data)
    except ValidationError as exc:
        where = f"model config {path_or_dict}" if isinstance(path_or_dict, str) else "model config"
        raise ConfigError(f"{where}: {describe(exc, ModelConfig)}") from None


def _read_model_file(data: dict, base_dir: str | None) -> dict:
    """``model: PATH`` replaced by that file's mapping: PATH as given (from the working directory), else
    relative to the training config's folder."""
    if not isinstance(data.get("model"), str):
        return data
    model_path = data["model"]
    if not os.path.isabs(model_path) and base_dir and not os.path.exists(model_path):
        model_path = os.path.join(base_dir, model_path)
    return {**data, "model": _load_yaml(model_path)}


def load_train_config(
    path_or_dict: str | dict, base_dir: str | None = None, sets: list[str] | None = None
) -> TrainConfig:
    """Load and validate a training config; a ``model:`` path is resolved relative to the file.
    ``sets`` are dotted command-line assignments (``optim.lr=3e-4``, ``model.n_layers=4``, or a model
    file ``model=configs/model/tiny.yaml``), applied in order after the model file is read and validated
    with everything else."""
    if isinstance(path_or_dict, str):
        base_dir = os.path.dirname(os.path.abspath(path_or_dict))
        data = _load_yaml(path_or_dict)
    else:
        data = dict(path_or_dict)
    data = _read_model_file(data, base_dir)
    for item in sets or []:  # one at a time: a model file set here is read before model.* assignments after it
        data = _read_model_file(apply_overrides(data, [item]), base_dir)
    _sources_from_mixture(data)
    _vocab_from_data(data)
    try:
        return TrainConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"train config: {describe(exc, TrainConfig)}") from None


def _sources_from_mixture(data: dict) -> None:
    """``data.mixture`` becomes ``data.sources``; a source not built yet is refused here, before any step."""
    from pretrain.mixture_presets import check_built, load_mixture, load_mixture_phases

    section = data.get("data")
    if not isinstance(section, dict) or not section.get("mixture"):
        return
    if section.get("sources"):
        raise ConfigError("set data.mixture or data.sources, not both")
    sources, phases = load_mixture(section["mixture"]), load_mixture_phases(section["mixture"])
    # the config's own phases win over the mixture file's (a run's saved config holds them)
    data["data"] = {
        **section,
        "sources": sources,
        **({"phases": phases} if phases and not section.get("phases") else {}),
    }
    check_sources(data["data"]["sources"], f"mixture {section['mixture']}")
    check_built(data["data"]["sources"])


def _vocab_from_data(data: dict) -> None:
    """``model.vocab_size: auto`` (or left out) becomes the shards' tokenizer's vocabulary, from their
    manifests, as nanoGPT and Megatron size the embedding: a larger one only adds rows no id reaches."""
    model, sources = data.get("model"), data.get("data")
    sources = sources.get("sources") if isinstance(sources, dict) else None
    if not isinstance(model, dict) or model.get("vocab_size", "auto") != "auto" or not isinstance(sources, list):
        return
    from pretrain.components.shard_totals import shard_totals

    paths = [s["path"] for s in sources if isinstance(s, dict) and isinstance(s.get("path"), str)]
    if paths:  # else validation names what is missing
        data["model"] = {**model, "vocab_size": shard_totals(paths)["vocab_size"]}


def save_yaml(model: BaseModel, path: str) -> None:
    from dataprep.core.storage import atomic_write_text

    atomic_write_text(path, yaml.safe_dump(model.model_dump(mode="json"), sort_keys=False))
