"""What every config in the project shares: the error type, the strict base model, the message, and
command-line overrides.

Both the pipeline configs (``dataprep.core.config``) and the model/training configs (``pretrain.config``)
build on these, so a typo reads the same everywhere: the key, then what is wrong with it, with the
closest known key for a misspelling.
"""

from __future__ import annotations

import difflib
import typing

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from dataprep.core.errors import UsageError, WorkFailed  # noqa: F401  (WorkFailed: its old import path)


class ConfigError(UsageError):
    """A configuration problem, with the offending key in the message."""


class StrictModel(BaseModel):
    """A config section: unknown keys are errors, never silently ignored."""

    model_config = ConfigDict(extra="forbid")


def describe(err: ValidationError, model: type[BaseModel] | None = None) -> str:
    """``problems`` on one line, separated by semicolons."""
    return "; ".join(problems(err, model))


def problems(err: ValidationError, model: type[BaseModel] | None = None) -> list[str]:
    """One ``dotted.key: message`` per problem (``unknown key`` for a typo, with the closest field of
    ``model`` at that place when there is one)."""
    out = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"]) or "(top level)"
        if e["type"] == "extra_forbidden":
            msg = "unknown key" + did_you_mean(str(e["loc"][-1]), _fields_at(model, e["loc"][:-1]))
        else:
            msg = e["msg"].removeprefix("Value error, ")  # our validators' messages say what is wrong already
        out.append(f"{loc}: {msg}")
    return out


def validated(model: type[BaseModel], **fields) -> BaseModel:
    """``model(**fields)`` from values the user gave (command-line flags): a ``ValidationError`` becomes a
    ``ConfigError`` with ``describe``'s one line, as a config file's does in its loader."""
    try:
        return model(**fields)
    except ValidationError as exc:
        raise ConfigError(describe(exc, model)) from None


def did_you_mean(word: str, known) -> str:
    """``; did you mean 'x'?`` for the closest of ``known``, or an empty string."""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _fields_at(model, loc) -> list[str]:
    """The field names of the (nested) model found at ``loc`` under ``model``; [] when unknown."""
    for part in loc:
        if model is None:
            return []
        if isinstance(part, int) or part not in getattr(model, "model_fields", {}):
            continue  # list index or a union's tag: stay on the element's model
        model = _model_of(model.model_fields[part].annotation)
    return list(getattr(model, "model_fields", {})) if model else []


def _model_of(annotation):
    """The BaseModel inside ``X``, ``X | None``, ``list[X]`` or ``dict[str, X]``, if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def apply_overrides(data: dict, assignments: list[str]) -> dict:
    """``["optim.lr=3e-4", "stages.1.threshold=0.5"]`` applied to a config's raw mapping (a copy).

    Values are YAML (``3e-4``, ``true``, ``[en, de]``, ``null``); a number in the path indexes a list;
    a key holding dots (``spark.conf.spark.executor.memory=4g``) matches an existing key of that name,
    and a new one is set with its section: ``spark.conf={spark.executor.memory: 4g}``. A key the config
    lacks is added, so validation names it if it is a typo."""
    import copy

    data = copy.deepcopy(data)
    for item in assignments:
        key, sep, raw = item.partition("=")
        parts = key.strip().split(".")
        if not sep or not all(parts):
            raise ConfigError(f"--set {item!r}: expected KEY.PATH=VALUE, e.g. optim.lr=3e-4")
        value = _parse_value(raw)
        node = data
        depth = 0
        while depth < len(parts):
            if isinstance(node, dict):  # keys may hold dots themselves (spark.conf's): the longest existing one
                span = next(
                    (n for n in range(len(parts) - depth, 1, -1) if ".".join(parts[depth : depth + n]) in node), 1
                )
                parts[depth : depth + span] = [".".join(parts[depth : depth + span])]
            part = parts[depth]
            last = depth == len(parts) - 1
            where = ".".join(parts[: depth + 1])
            if isinstance(node, list):
                if not part.lstrip("-").isdigit() or not -len(node) <= int(part) < len(node):
                    raise ConfigError(f"--set {key}: {where} is not an index of a list of {len(node)} entries")
                part = int(part)
            elif not isinstance(node, dict):
                raise ConfigError(f"--set {key}: {'.'.join(parts[:depth])} is a value, not a section")
            if last:
                node[part] = value
            else:
                if isinstance(node, dict) and not isinstance(node.get(part), (dict, list)):
                    node[part] = {}
                node = node[part]
            depth += 1
    return data


def _parse_value(raw: str):
    """A YAML value, with ``3e-4`` a number (YAML 1.1 reads exponents without a dot as strings)."""
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        return raw
    if isinstance(value, str):
        try:
            return float(value) if value.strip().lower() not in ("nan", "inf", "-inf", "infinity") else value
        except ValueError:
            return value
    return value


def split_dotted_options(argv: list[str]) -> tuple[list[str], list[str]]:
    """torchtitan-style ``--optim.lr 3e-4`` / ``--optim.lr=3e-4`` options -> ``optim.lr=3e-4``
    assignments, and the rest of ``argv`` for argparse. Only option names with a dot count."""
    rest, sets = [], []
    i = 0
    while i < len(argv):
        arg = argv[i]
        name = arg[2:].split("=", 1)[0]
        if arg.startswith("--") and "." in name and not name[0].isdigit():
            if "=" in arg:
                sets.append(arg[2:])
            elif i + 1 < len(argv):
                sets.append(f"{name}={argv[i + 1]}")
                i += 1
            else:
                raise ConfigError(f"{arg}: expected a value")
        else:
            rest.append(arg)
        i += 1
    return rest, sets
