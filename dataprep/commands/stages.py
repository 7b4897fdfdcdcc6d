"""``dataprep stages``: the config reference (``dataprep.core.stage_reference``), as text or JSON."""

from __future__ import annotations

import argparse
import json

from dataprep.core.registry import UnknownStage, stage_names
from dataprep.core.stage_reference import describe, format_reference


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="show one stage only")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def main(args: argparse.Namespace) -> int:
    stages = [s for s in describe() if not args.name or s["stage"] == args.name]
    if args.name and not stages:
        from dataprep.core.validation import did_you_mean

        raise UnknownStage(f"unknown stage {args.name!r}{did_you_mean(args.name, stage_names())}")
    if args.json:
        print(json.dumps(stages, indent=2, default=str))
        return 0
    print(format_reference(stages, full_doc=bool(args.name)), end="")
    return 0
