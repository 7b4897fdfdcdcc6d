"""``dataprep run CONFIG.yaml``: the Common Crawl cleaning pipeline as a Spark job.

Runs in local mode by default and unchanged under ``spark-submit`` (``spark-submit pipelines/cli.py run
CONFIG.yaml``); how a run resumes and fails is ``pipelines.pipeline_run``'s to say. Exit status 1 when
a step's errors exceed the config's error budget, no input file holds a readable record, or a stage drops
every document (after writing stats.json and printing the table).
"""

from __future__ import annotations

import argparse
import json
import sys

from dataprep.core.arguments import output_folder, spark_master
from dataprep.core.cli import add_set_argument, fail
from dataprep.core.config import load_config
from dataprep.core.stats import ErrorBudgetExceeded
from dataprep.core.storage import join_path
from pipelines.pipeline_run import NoReadableInput, NothingKept, run_pipeline


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="pipeline YAML, or a shipped preset's name (fineweb, ingest, ...)")
    parser.add_argument(
        "--input", nargs="+", metavar="PATH", help="override input.paths: files, globs, *.paths.gz, s3:// URLs"
    )
    parser.add_argument("--output", type=output_folder, metavar="DIR", help="override output.dir")
    parser.add_argument(
        "--master",
        type=spark_master,
        help="Spark master, e.g. local[*] or spark://host:7077 (default: config, or spark-submit's)",
    )
    parser.add_argument("--force", action="store_true", help="redo every step even if a previous run finished it")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace what another run (another config or input) left in the output folder; without it such a run "
        "is refused",
    )
    parser.add_argument(
        "--signals",
        action="store_true",
        help="run every stage on every document and keep its values and verdicts in OUT/signals (for dataprep filter)",
    )
    add_set_argument(parser)
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the result (output paths, per-stage stats) as JSON on stdout; progress goes to stderr",
    )


INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command stopped by Ctrl-C


def main(args: argparse.Namespace) -> int:
    import contextlib

    overrides: dict = {}
    if args.input:
        overrides["input"] = {"paths": args.input}
    if args.output:
        overrides["output"] = {"dir": args.output}
    if args.master:
        overrides["spark"] = {"master": args.master}
    config = load_config(args.config, overrides, sets=getattr(args, "set", None))
    progress = contextlib.redirect_stdout(sys.stderr) if getattr(args, "json", False) else contextlib.nullcontext()
    try:
        with progress:
            if getattr(args, "signals", False):
                from pipelines.signals_run import run_signals

                result = run_signals(config, force=args.force, overwrite=getattr(args, "overwrite", False))
            else:
                result = run_pipeline(config, force=args.force, overwrite=getattr(args, "overwrite", False))
    except (ErrorBudgetExceeded, NoReadableInput, NothingKept) as exc:
        return fail(f"dataprep run: {exc}", 1, getattr(args, "json", False))
    except KeyboardInterrupt:  # Ctrl-C: what finished is kept, and the same command picks up from there
        again = "the same command again" + (" without --force" if args.force else "")
        return fail(
            f"dataprep run: interrupted; to resume, run {again}: the steps and tasks that finished are kept",
            INTERRUPTED,
            getattr(args, "json", False),
        )
    if getattr(args, "json", False):
        print(
            json.dumps(
                {
                    "output_dir": result.output_dir,
                    "corpus_dir": result.corpus_dir,
                    "files": result.files,
                    "skipped_steps": result.skipped_steps,
                    "steps": result.steps,
                    "stats": join_path(result.output_dir, "stats.json"),
                    "stages": [s.to_dict() for s in result.stats],
                },
                ensure_ascii=False,
            )
        )
    return 0
