"""``dataprep export-nanogpt SHARD_DIR --output DIR``: token shards as nanoGPT's ``train.bin`` and ``val.bin``
(``dataprep.tokenize.nanogpt``)."""

from __future__ import annotations

import argparse

from dataprep.core.arguments import fraction, output_folder
from dataprep.core.cli import add_output_argument
from dataprep.core.errors import UsageError
from dataprep.tokenize.nanogpt import export_nanogpt


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", help="token-shard directory (manifest.json)")
    add_output_argument(parser, type=output_folder, metavar="DIR", help="folder for train.bin and val.bin")
    parser.add_argument(
        "out_dir", nargs="?", type=output_folder, help=argparse.SUPPRESS
    )  # the older spelling, for a release
    parser.add_argument("--val-fraction", type=fraction, default=0.0005, help="share of documents for val.bin")


def main(args: argparse.Namespace) -> int:
    output = args.output or args.out_dir
    if not output:
        raise UsageError("give --output DIR: the folder for train.bin and val.bin")
    counts = export_nanogpt(args.dir, output, args.val_fraction)
    print(
        f"{output}: train.bin {counts['train_tokens']} tokens, val.bin {counts['val_tokens']} tokens "
        f"({counts['val_documents']} documents)"
    )
    return 0
