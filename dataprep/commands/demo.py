"""``dataprep demo-data``: write the demo crawl and its reference articles (dataprep/demo/corpus.py) into a folder."""

from __future__ import annotations

import argparse
import os

from dataprep.core.arguments import output_folder
from dataprep.demo.corpus import FILENAME, REFERENCE_FILENAME, write_demo_warc, write_reference


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", type=output_folder, required=True, help=f"directory to write {FILENAME} into")


def main(args: argparse.Namespace) -> int:
    path = os.path.join(args.output, FILENAME)
    counts = write_demo_warc(path)
    summary = ", ".join(f"{n} {category}" for category, n in counts.items())
    print(f"wrote {path} ({os.path.getsize(path):,} bytes): {summary}")
    reference = os.path.join(args.output, REFERENCE_FILENAME)
    print(f"wrote {reference}: {write_reference(reference)} English reference articles for the perplexity model")
    return 0
