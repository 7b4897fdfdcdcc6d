"""What the ``dataprep`` and ``pretrain`` commands share: each maps subcommands to modules exposing
``add_arguments`` and ``main`` (``pipelines.cli``, ``pretrain.cli``), and ``dispatch`` runs one.

Modules are imported only when their command runs, so ``--help`` stays fast and a missing optional
dependency breaks only the command that needs it (with the extra to install).

Conventions shared by every command of ``dataprep`` and ``pretrain``: exit status 0 on success, 1 when
the work failed, 2 for a usage or configuration error (one message, no traceback; ``CCP_DEBUG=1`` shows
it), each from the project's own error types (``dataprep.core.errors``); any other exception is a bug,
shown with its traceback and a line asking to report it (exit 1); ``--log-level`` sets the
``ccpretrain`` loggers' level; a command that takes ``--set KEY=VALUE`` also takes torchtitan-style
``--optim.lr 3e-4``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from types import ModuleType

from dataprep.core.errors import CcpretrainError
from dataprep.core.extras import EXTRAS, install_command


def build_parser(commands: dict, prog: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in commands.items():
        sub.add_parser(name, help=help_text, description=help_text)
    return parser


LOG_LEVELS = ("debug", "info", "warning", "error")


def add_set_argument(parser: argparse.ArgumentParser) -> None:
    """``--set KEY.PATH=VALUE`` (repeatable), for commands that read a config."""
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="set",
        help="override a config value by its dotted path, e.g. optim.lr=3e-4 or stages.1.threshold=0.5 "
        "(repeatable; also written --optim.lr 3e-4)",
    )


def add_output_argument(parser: argparse.ArgumentParser, *, old: tuple[str, ...] = (), **kwargs) -> argparse.Action:
    """``--output``: where a command writes, one spelling for every command. The ``old`` spellings
    (``--out``, ``--out-dir``) are still read, unlisted in ``--help``, for one release."""
    action = parser.add_argument("--output", **kwargs)
    for flag in old:
        parser.add_argument(
            flag, dest=action.dest, type=kwargs.get("type"), default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
    return action


def command_parser(commands: dict, prog: str, name: str) -> tuple[ModuleType, argparse.ArgumentParser]:
    """The module of command ``name`` (imported now) and its argument parser."""
    module_name, help_text = commands[name]
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=f"{prog} {name}", description=help_text)
    module.add_arguments(parser)
    parser.add_argument(
        "--log-level", choices=LOG_LEVELS, default="warning", help="ccpretrain's log messages (default: warning)"
    )
    return module, parser


def dispatch(commands: dict, prog: str, description: str, argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(commands, prog, description)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in commands:
        parser.print_help() if not argv or argv[0] in ("-h", "--help") else parser.error(f"unknown command {argv[0]!r}")
        return 0
    try:
        module, sub = command_parser(commands, prog, argv[0])
    except ModuleNotFoundError as exc:
        return _missing_package(f"{prog} {argv[0]}", exc, "--json" in argv[1:])
    wants_json = "--json" in argv[1:]

    def usage_error(message: str):  # argparse's, without the whole usage block; plus the object --json promises
        if wants_json:
            print_failure_json(f"{prog} {argv[0]}: error: {message}", 2)
        sub.exit(2, f"{prog} {argv[0]}: error: {message}\n(`{prog} {argv[0]} --help` lists its options)\n")

    sub.error = usage_error
    rest = argv[1:]
    if any(action.dest == "set" for action in sub._actions):
        from dataprep.core.validation import ConfigError, split_dotted_options

        try:
            rest, dotted = split_dotted_options(rest)
        except ConfigError as exc:
            sub.error(str(exc))
        rest += [f"--set={item}" for item in dotted]
    args = sub.parse_args(rest)
    import logging

    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("ccpretrain").setLevel(args.log_level.upper())
    logging.getLogger("dataprep").setLevel(args.log_level.upper())
    try:
        return int(module.main(args) or 0)
    except BrokenPipeError:  # `| head` closed the pipe: stop quietly, as other commands do
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes at exit
        return 141  # 128 + SIGPIPE, what a shell reports for a command killed by the pipe
    except ModuleNotFoundError as exc:
        return _missing_package(f"{prog} {argv[0]}", exc, wants_json)
    except CcpretrainError as exc:
        # The user's input or a failed run, in the project's own words: one line, no traceback (CCP_DEBUG=1 shows it).
        import os

        if os.environ.get("CCP_DEBUG"):
            raise
        return fail(f"{prog} {argv[0]}: error: {exc}", exc.exit_status, wants_json)
    except Exception as exc:  # anything else is a bug: its traceback, and a request to report it
        import os
        import traceback

        if wants_json:  # the traceback goes to stderr, but stdout still holds the promised object
            print_failure_json(f"{prog} {argv[0]}: internal error: {type(exc).__name__}: {exc}", 1)
        if os.environ.get("CCP_DEBUG"):
            raise
        traceback.print_exc()
        print(BUG_REPORT_LINE, file=sys.stderr, flush=True)
        return 1


BUG_REPORT_LINE = "ccpretrain: this is a bug; please report it with the traceback above"


def print_failure_json(message: str, status: int) -> None:
    """The one JSON object ``--json`` prints on stdout when a command fails."""
    import json

    print(json.dumps({"ok": False, "exit_status": status, "error": message}, ensure_ascii=False), flush=True)


def fail(message: str, status: int, as_json: bool = False) -> int:
    """A failed command's one line on stderr (and its JSON object on stdout with ``--json``); returns the status."""
    print(message, file=sys.stderr, flush=True)
    if as_json:
        print_failure_json(message, status)
    return status


def _missing_package(command: str, exc: ModuleNotFoundError, as_json: bool = False) -> int:
    """A command whose side of the install is missing: name the extra, exit 1 (a failed run, not usage)."""
    top = (exc.name or "").split(".")[0]
    if top not in EXTRAS:
        raise exc
    return fail(
        f"{command}: error: this command needs {top!r}, which is not installed: {install_command(top)}", 1, as_json
    )
