"""``dataprep index-shards DIR``: write ``manifest.json`` for Megatron ``.bin``/``.idx`` shards made
elsewhere (``dataprep.tokenize.index_shards``)."""

from __future__ import annotations

import argparse
import json
import os

from dataprep.core.errors import UsageError
from dataprep.tokenize.index_shards import index_shards


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", help="folder of Megatron .bin/.idx shard pairs")
    parser.add_argument("--vocab-size", type=int, required=True, help="the tokenizer's vocabulary size")
    parser.add_argument("--eos", type=int, required=True, help="end-of-document token id")
    parser.add_argument("--bos", type=int, help="beginning-of-document token id, if the tokenizer has one")
    parser.add_argument(
        "--tokenizer", help="tokenizer.json or SentencePiece model the shards were made with (hashed into the manifest)"
    )
    parser.add_argument("--json", action="store_true", help="print the manifest's summary as JSON")


def main(args: argparse.Namespace) -> int:
    if args.vocab_size <= 0:
        raise UsageError(f"--vocab-size {args.vocab_size}: must be positive")
    manifest = index_shards(args.dir, args.vocab_size, args.eos, args.bos, args.tokenizer)
    summary = {k: manifest[k] for k in ("num_shards", "documents", "tokens", "dtype", "vocab_size")}
    print(
        json.dumps(summary)
        if args.json
        else f"wrote {os.path.join(args.dir, 'manifest.json')}: {summary['num_shards']} shards, "
        f"{summary['documents']:,} documents, "
        f"{summary['tokens']:,} tokens ({summary['dtype']})"
    )
    return 0
