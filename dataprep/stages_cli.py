"""``dataprep stages``: the config reference, generated from the stage classes themselves."""

from __future__ import annotations

import argparse
import json

from dataprep.registry import MissingDependency, stage_class, stage_names
from dataprep.stage import GlobalStage


def describe() -> list[dict]:
    """Every stage, its kind, summary and parameters; a stage that cannot load says what it needs."""
    out = []
    for name in stage_names():
        try:
            cls = stage_class(name)
        except MissingDependency as exc:
            out.append({"stage": name, "kind": "unavailable", "summary": str(exc), "params": []})
            continue
        params = []
        for field_name, f in cls.model_fields.items():
            default = None if f.is_required() else f.get_default(call_default_factory=True)
            params.append(
                {
                    "name": field_name,
                    "type": getattr(f.annotation, "__name__", str(f.annotation)).replace("typing.", ""),
                    "default": default,
                    "description": f.description or "",
                }
            )
        doc = (cls.__doc__ or "").strip().splitlines()
        out.append({"stage": name, "kind": "global" if issubclass(cls, GlobalStage) else "document", "summary": doc[0] if doc else "", "params": params})
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="show one stage only")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def main(args: argparse.Namespace) -> int:
    stages = [s for s in describe() if not args.name or s["stage"] == args.name]
    if args.name and not stages:
        raise KeyError(f"unknown stage {args.name!r}")
    if args.json:
        print(json.dumps(stages, indent=2, default=str))
        return 0
    for s in stages:
        print(f"{s['stage']} ({s['kind']} stage): {s['summary']}")
        for p in s["params"]:
            desc = f"  # {p['description']}" if p["description"] else ""
            print(f"    {p['name']}: {p['type']} = {json.dumps(p['default'], default=str)}{desc}")
        print()
    return 0
