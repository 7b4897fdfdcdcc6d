"""``dataprep estimate SAMPLE_OUTPUT``: the core-hours, wall time and sizes of a whole crawl, projected
from a sample run (``dataprep run`` on a few files of the listing) by ``dataprep.core.estimate``."""

from __future__ import annotations

import argparse
import json

from dataprep.core.arguments import positive_float, whole_number
from dataprep.core.errors import UsageError
from dataprep.core.estimate import estimate, format_estimate, global_stage_names, load_sample, pages_from_files


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "sample",
        nargs="+",
        help="the output folder (or its stats.json) of a `dataprep run` on a sample of the crawl; "
        "two samples of different sizes separate fixed costs from costs per page",
    )
    size = parser.add_mutually_exclusive_group(required=True)
    size.add_argument("--pages", type=whole_number, help="pages in the whole crawl (2.5e9 or 2500000000)")
    size.add_argument(
        "--listing",
        metavar="PATHS",
        help="the crawl's file listing (warc.paths.gz, a glob, a folder): its files times pages per file",
    )
    parser.add_argument("--pages-per-file", type=float, help="pages per input file (default: the sample's)")
    parser.add_argument(
        "--cores", type=int, default=1, help="cores the crawl will run on, for the wall time (default 1)"
    )
    parser.add_argument(
        "--sample-cores", type=int, help="cores the samples ran on (default: what their stats.json recorded)"
    )
    parser.add_argument(
        "--price-per-core-hour",
        type=positive_float,
        metavar="PRICE",
        help="what one core-hour costs (in your currency): prints the crawl's money",
    )
    parser.add_argument("--json", action="store_true", help="print the estimate as JSON")


def main(args: argparse.Namespace) -> int:
    loaded = [load_sample(path, args.sample_cores) for path in args.sample]
    samples = [sample for sample, _ in loaded]
    largest, files = max(loaded, key=lambda item: item[0].pages)
    per_file = args.pages_per_file or (largest.pages / files if files else None)
    if args.listing:
        from dataprep.core.inputs import expand_inputs

        if not per_file:
            raise UsageError("the sample's stats.json does not say how many files it read: give --pages-per-file")
        pages = pages_from_files(len(expand_inputs([args.listing])), per_file)
    else:
        pages = args.pages
    result = estimate(samples, pages, args.cores, global_stage_names(largest.stats), per_file)
    out, text = result.to_dict(), format_estimate(result)
    if args.price_per_core_hour is not None:
        out["money"] = result.core_hours * args.price_per_core_hour
        text += (
            f"\nmoney: {out['money']:,.2f} for {result.core_hours:,.1f} core-hours at "
            f"{args.price_per_core_hour:g} per core-hour"
        )
    print(json.dumps(out) if args.json else text)
    return 0
