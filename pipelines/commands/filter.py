"""``dataprep filter SIGNALS_OUT --config CONFIG --output OUT``: a config's corpus, stats and token shards
from the signals a ``dataprep run CONFIG --signals`` kept, without reading the input again
(``pipelines.filter_run``). Exit status 1 when a step's errors exceed the error budget."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys

from dataprep.core.arguments import output_folder, spark_master
from dataprep.core.cli import add_set_argument, fail
from dataprep.core.config import load_config
from dataprep.core.stats import ErrorBudgetExceeded
from dataprep.core.storage import join_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("signals", metavar="SIGNALS_OUT", help="the output folder of a `dataprep run CONFIG --signals`")
    parser.add_argument(
        "--config", required=True, help="pipeline YAML or preset: the signals run's stages, thresholds may differ"
    )
    parser.add_argument(
        "--output", type=output_folder, required=True, metavar="DIR", help="where the corpus, shards and stats go"
    )
    parser.add_argument(
        "--where",
        action="append",
        metavar="EXPR",
        help="keep only documents for which this Spark SQL expression over the signal columns is true (repeatable)",
    )
    parser.add_argument(
        "--master", type=spark_master, help="Spark master, e.g. local[*] (default: config, or spark-submit's)"
    )
    parser.add_argument("--force", action="store_true", help="redo every step even if a previous run finished it")
    parser.add_argument("--overwrite", action="store_true", help="replace what another run left in the output folder")
    add_set_argument(parser)
    parser.add_argument(
        "--json", action="store_true", help="print the result as JSON on stdout; progress goes to stderr"
    )


def main(args: argparse.Namespace) -> int:
    from pipelines.filter_run import run_filter

    overrides: dict = {"output": {"dir": args.output}}
    if args.master:
        overrides["spark"] = {"master": args.master}
    config = load_config(args.config, overrides, sets=getattr(args, "set", None))
    progress = contextlib.redirect_stdout(sys.stderr) if args.json else contextlib.nullcontext()
    try:
        with progress:
            result = run_filter(args.signals, config, args.where, force=args.force, overwrite=args.overwrite)
    except ErrorBudgetExceeded as exc:
        return fail(f"dataprep filter: {exc}", 1, args.json)
    if args.json:
        print(
            json.dumps(
                {
                    "output_dir": result.output_dir,
                    "corpus_dir": result.corpus_dir,
                    "steps": result.steps,
                    "stats": join_path(result.output_dir, "stats.json"),
                    "stages": [s.to_dict() for s in result.stats],
                },
                ensure_ascii=False,
            )
        )
    return 0
