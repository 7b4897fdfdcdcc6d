"""``dataprep train-ppl-model``: train a CCNet-style perplexity model on a reference corpus (JSONL)."""

from __future__ import annotations

import argparse
import json
import sys

from dataprep.core.arguments import fraction, output_folder, positive_int
from dataprep.core.inputs import read_jsonl_field


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--input", required=True, nargs="+", help="reference JSONL file(s), .gz allowed (e.g. Wikipedia text)"
    )
    parser.add_argument("--lang", required=True, help="language code the model is for (ISO 639-1)")
    parser.add_argument(
        "--output", type=output_folder, required=True, help="model directory to write (replaced if it exists)"
    )
    parser.add_argument("--text-field", default="text")
    parser.add_argument("--vocab-size", type=positive_int, default=8000, help="SentencePiece vocabulary (default 8000)")
    parser.add_argument("--order", type=positive_int, default=3, help="n-gram order, 2..6 (default 3)")
    parser.add_argument(
        "--heldout", type=fraction, default=0.1, help="share of documents held out for the bucket cut-offs"
    )
    parser.add_argument("--max-documents", type=positive_int, default=None, help="read at most this many documents")


def main(args: argparse.Namespace) -> int:
    from dataprep.quality.perplexity import train_model

    texts, skipped = read_jsonl_field(args.input, args.text_field, limit=args.max_documents)
    if skipped:
        print(f"skipped {skipped} lines without a usable {args.text_field!r} field", file=sys.stderr)
    meta = train_model(
        texts, args.lang, args.output, vocab_size=args.vocab_size, order=args.order, heldout_fraction=args.heldout
    )
    print(json.dumps({"output": args.output, **meta}, indent=2))
    return 0
