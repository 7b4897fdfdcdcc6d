"""The config reference, generated from the stage classes themselves (``dataprep stages`` prints it,
docs/stages.md is checked against it).

For each parameter: its type, allowed values (a ``Literal``'s choices), bounds (``ge``/``gt``/...),
whether it is required, its default and its description (the field's ``description``, else the
comment beside it in the source), and each stage's full docstring.
"""

from __future__ import annotations

import inspect
import io
import json
import re
import tokenize
import typing

from pydantic import BaseModel

from dataprep.core.registry import MissingDependency, stage_class, stage_names
from dataprep.core.stage import GlobalStage

_BOUNDS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}


def _source_comments(cls) -> dict[str, str]:
    """``name: type = ...  # comment`` lines of a class body (and its bases') -> comment."""
    comments: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        lines = source.splitlines()
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.COMMENT:
                match = re.match(r"\s+([A-Za-z_]\w*)\s*:", lines[tok.start[0] - 1])
                if match:
                    comments[match.group(1)] = tok.string.lstrip("#").strip()
    return comments


def _type_name(annotation) -> str:
    if typing.get_origin(annotation) is typing.Literal:
        return "str" if all(isinstance(a, str) for a in typing.get_args(annotation)) else "value"
    if typing.get_origin(annotation) is None and isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def _choices(annotation) -> list | None:
    """The allowed values of a Literal (also inside ``X | None``), else None."""
    if typing.get_origin(annotation) is typing.Literal:
        return list(typing.get_args(annotation))
    for arg in typing.get_args(annotation):
        found = _choices(arg)
        if found:
            return found
    return None


def _bounds(field) -> str:
    parts = [
        f"{_BOUNDS[k]} {getattr(m, k)}" for m in field.metadata for k in _BOUNDS if getattr(m, k, None) is not None
    ]
    return ", ".join(parts)


def _nested_model(annotation) -> type[BaseModel] | None:
    """The settings model a field holds (``train: TokenizerTraining | None``), else None."""
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _params(cls, prefix: str = "") -> list[dict]:
    """Every setting of a stage, a nested settings model's as ``field.sub`` (what ``--set`` takes)."""
    comments = _source_comments(cls)
    params = []
    for field_name, f in cls.model_fields.items():
        required = f.is_required()
        nested = _nested_model(f.annotation)
        default = None if required else f.get_default(call_default_factory=True)
        params.append(
            {
                "name": prefix + field_name,
                "type": nested.__name__ if nested else _type_name(f.annotation),
                "required": required,
                "default": default.model_dump(mode="json") if isinstance(default, BaseModel) else default,
                "choices": _choices(f.annotation),
                "bounds": _bounds(f),
                "description": f.description or comments.get(field_name, ""),
            }
        )
        if nested:
            params += _params(nested, f"{prefix}{field_name}.")
    return params


def describe() -> list[dict]:
    """Every stage, its kind, summary, full docstring and parameters; a stage that cannot load says what it needs."""
    out = []
    for name in stage_names():
        try:
            cls = stage_class(name)
        except MissingDependency as exc:
            out.append({"stage": name, "kind": "unavailable", "summary": str(exc), "doc": str(exc), "params": []})
            continue
        params = _params(cls)
        doc = inspect.cleandoc(cls.__doc__ or "")
        out.append(
            {
                "stage": name,
                "kind": "global" if issubclass(cls, GlobalStage) else "document",
                "summary": doc.split("\n\n")[0].replace("\n", " "),
                "doc": doc,
                "params": params,
            }
        )
    return out


def format_reference(stages: list[dict], full_doc: bool = False) -> str:
    """``describe()``'s stages as text: each stage, its summary (or whole docstring) and a line per setting."""
    lines = []
    for s in stages:
        lines.append(f"{s['stage']} ({s['kind']} stage)")
        lines += [f"  {line}" for line in (s["doc"] if full_doc else s["summary"]).splitlines()]
        for p in s["params"]:
            value = "REQUIRED" if p["required"] else json.dumps(p["default"], default=str)
            extra = [
                f"one of {', '.join(map(str, p['choices']))}" if p["choices"] else "",
                p["bounds"],
                p["description"],
            ]
            desc = "; ".join(x for x in extra if x)
            lines.append(f"    {p['name']}: {p['type']} = {value}" + (f"  # {desc}" if desc else ""))
        lines.append("")
    return "".join(line + "\n" for line in lines)
