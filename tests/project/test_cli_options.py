"""Every ``dataprep`` and ``pretrain`` command spells "where to write" ``--output`` (the older ``--out`` and
``--out-dir`` still work for a release, unlisted), and a long ``--help`` comes in sections."""

from __future__ import annotations

import argparse

import pytest
import yaml

from dataprep.core.cli import command_parser
from pipelines.cli import COMMANDS as DATAPREP
from pretrain.cli import COMMANDS as PRETRAIN
from pretrain.cli import main as pretrain_main

COMMANDS = [("dataprep", DATAPREP, name) for name in DATAPREP] + [("pretrain", PRETRAIN, name) for name in PRETRAIN]
# the commands that write files or folders
WRITERS = {
    "run",
    "filter",
    "demo-data",
    "train-ppl-model",
    "arpa export",
    "arpa import",
    "train-classifier",
    "train-tokenizer",
    "export-nanogpt",
    "report",
    "size",
    "plan",
    "train",
    "plot",
    "export",
    "ablate",
}
MOST_OPTIONS_PER_SECTION = 12


def _parsers(prog: str, table: dict, name: str):
    """(command line name, parser) of a command and of each of its sub-commands (``arpa export``)."""
    _, parser = command_parser(table, prog, name)
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield f"{name} {sub_name}", sub


def _visible(actions) -> list[argparse.Action]:
    return [a for a in actions if a.option_strings and a.help != argparse.SUPPRESS]


@pytest.mark.parametrize("prog,table,name", COMMANDS, ids=[f"{p} {n}" for p, _, n in COMMANDS])
def test_where_to_write_is_spelt_output(prog, table, name):
    for line, parser in _parsers(prog, table, name):
        flags = {flag for action in _visible(parser._actions) for flag in action.option_strings}
        assert not flags & {"--out", "--out-dir", "--output-dir", "--out-file"}, f"{prog} {line}"
        if line in WRITERS:
            assert "--output" in flags, f"{prog} {line} writes but has no --output"


@pytest.mark.parametrize("prog,table,name", COMMANDS, ids=[f"{p} {n}" for p, _, n in COMMANDS])
def test_long_help_groups_its_options_in_sections(prog, table, name):
    for line, parser in _parsers(prog, table, name):
        for section in parser._action_groups:
            shown = _visible(section._group_actions)
            assert len(shown) <= MOST_OPTIONS_PER_SECTION, (
                f"{prog} {line}: {len(shown)} options under {section.title!r}: group them (add_argument_group)"
            )


def test_every_writer_is_a_command():
    lines = {line for prog, table, name in COMMANDS for line, _ in _parsers(prog, table, name)}
    assert WRITERS <= lines


@pytest.mark.parametrize(
    "command,old,new",
    [
        (["train", "cfg.yaml"], "--out-dir", "--output"),
        (["plan", "1b"], "--out", "--output"),
        (["size", "1b"], "--out", "--output"),
    ],
)
def test_older_spellings_still_parse_to_the_same_option(command, old, new):
    _, parser = command_parser(PRETRAIN, "pretrain", command[0])
    assert parser.parse_args([*command[1:], old, "somewhere"]).output == "somewhere"
    assert parser.parse_args([*command[1:], new, "somewhere"]).output == "somewhere"
    assert old + " " not in parser.format_help()


def test_an_older_spelling_writes_what_output_writes(tmp_path):
    assert pretrain_main(["size", "125M", "--out", str(tmp_path / "old.yaml")]) == 0
    assert pretrain_main(["size", "125M", "--output", str(tmp_path / "new.yaml")]) == 0
    old, new = (yaml.safe_load((tmp_path / f"{n}.yaml").read_text()) for n in ("old", "new"))
    assert old == new and old["d_model"] > 0
