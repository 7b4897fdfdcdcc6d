"""``dataprep report OUTPUT_DIR``: write ``report.html``, ``report.md`` and their PNGs for a pipeline
output, plus the sections other packages provide for a training run (``--train-run``); the report itself
is built by ``dataprep.report.build``."""

from __future__ import annotations

import argparse

from dataprep.core.arguments import output_folder, positive_int
from dataprep.core.cli import add_output_argument
from dataprep.core.errors import UsageError
from dataprep.report.build import build_report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "pipeline_output",
        metavar="OUTPUT_DIR",
        help="a `dataprep run` output folder (holding stats.json, steps/, corpus/)",
    )
    parser.add_argument(
        "--train-run", metavar="RUN_DIR", help="a training run folder (or its metrics JSONL): adds its curves"
    )
    add_output_argument(
        parser,
        old=("--out",),
        type=output_folder,
        metavar="DIR",
        help="where to write the report (default: OUTPUT_DIR/report)",
    )
    parser.add_argument(
        "--max-docs",
        type=positive_int,
        default=1_000_000,
        help="documents read for the distributions (default: %(default)s)",
    )


def main(args: argparse.Namespace) -> int:
    if args.max_docs <= 0:
        raise UsageError("--max-docs must be positive")
    html_path, md_path = build_report(args.pipeline_output, args.output, args.train_run, args.max_docs)
    print(f"report: {html_path}\nsummary: {md_path}")
    return 0
