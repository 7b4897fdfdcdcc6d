"""``dataprep`` command line: one subcommand per module, each exposing ``add_arguments`` and ``main``.

Modules are imported only when their command runs, so ``dataprep --help`` stays fast and a missing
optional dependency breaks only the command that needs it.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# command -> (module, one-line help). Each module defines add_arguments(parser) and main(args) -> int.
COMMANDS = {
    "run": ("pipelines.run", "run a cleaning pipeline config on Spark (local[*] by default)"),
    "stages": ("dataprep.stages_cli", "list every stage and its parameters (the config reference)"),
    "demo-data": ("dataprep.demo", "write the bundled sample WARC used by the demo"),
    "train-ppl-model": ("dataprep.quality.perplexity_cli", "train a CCNet-style n-gram perplexity model"),
    "train-classifier": ("dataprep.classifier_cli", "train a fastText quality/toxicity classifier"),
    "train-tokenizer": ("pipelines.train_tokenizer", "train a SentencePiece tokenizer on a cleaned corpus"),
    "verify-shards": ("dataprep.tokenize.verify", "check every token shard against its manifest"),
    "export-nanogpt": ("dataprep.tokenize.nanogpt", "export token shards to nanoGPT's train.bin/val.bin (uint16)"),
    "report": ("dataprep.report.cli", "write an HTML + Markdown report of a pipeline output"),
}


def build_parser(commands: dict, prog: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in commands.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
    return parser


def dispatch(commands: dict, prog: str, description: str, argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(commands, prog, description)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in commands:
        parser.print_help() if not argv or argv[0] in ("-h", "--help") else parser.error(f"unknown command {argv[0]!r}")
        return 0
    module_name, help_text = commands[argv[0]]
    module = importlib.import_module(module_name)
    sub = argparse.ArgumentParser(prog=f"{prog} {argv[0]}", description=help_text)
    module.add_arguments(sub)
    args = sub.parse_args(argv[1:])
    try:
        return int(module.main(args) or 0)
    except BrokenPipeError:  # `| head` closed the pipe: stop quietly, as other commands do
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes at exit
        return 141  # 128 + SIGPIPE, what a shell reports for a command killed by the pipe
    except (ValueError, FileNotFoundError, KeyError) as exc:
        # Configuration and input problems: one clear line, no traceback (set CCP_DEBUG=1 for it).
        import os

        if os.environ.get("CCP_DEBUG"):
            raise
        print(f"{prog} {argv[0]}: error: {exc}", file=sys.stderr)
        return 2


def main(argv: list[str] | None = None) -> int:
    return dispatch(COMMANDS, "dataprep", "Clean Common Crawl into a pretraining corpus.", argv)


if __name__ == "__main__":
    sys.exit(main())
