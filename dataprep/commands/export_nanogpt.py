"""``dataprep export-nanogpt SHARD_DIR OUT_DIR``: token shards as nanoGPT's ``train.bin`` and ``val.bin``
(``dataprep.tokenize.nanogpt``)."""

from __future__ import annotations

import argparse

from dataprep.core.arguments import fraction, output_folder
from dataprep.tokenize.nanogpt import export_nanogpt


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", help="token-shard directory (manifest.json)")
    parser.add_argument("out_dir", type=output_folder, help="folder for train.bin and val.bin")
    parser.add_argument("--val-fraction", type=fraction, default=0.0005, help="share of documents for val.bin")


def main(args: argparse.Namespace) -> int:
    counts = export_nanogpt(args.dir, args.out_dir, args.val_fraction)
    print(f"{args.out_dir}: train.bin {counts['train_tokens']} tokens, val.bin {counts['val_tokens']} tokens ({counts['val_documents']} documents)")
    return 0
