"""``pretrain lineage PATH``: the data a model was trained on, back to the crawl, and ``pretrain lineage --uses
CORPUS RUNS_DIR...``: the runs and exported models trained on a corpus (``pretrain.lineage``)."""

from __future__ import annotations

import argparse
import json

from dataprep.core.errors import UsageError
from pretrain.lineage import corpus_identity, format_lineage, read_lineage, runs_using


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="an exported model folder, a run folder, a step-* checkpoint or a model.safetensors; "
        "with --uses: the folders to search for runs and exported models",
    )
    parser.add_argument(
        "--uses",
        metavar="CORPUS_OR_SHARDS",
        help="list the runs and exported models under PATH... trained on this token-shard folder (or "
        "pipeline output): the same manifest, or shards of the same pipeline run",
    )
    parser.add_argument("--json", action="store_true", help="print the lineage (or the runs found) as JSON")


def main(args: argparse.Namespace) -> int:
    if args.uses:
        corpus = corpus_identity(args.uses)
        found = runs_using(corpus, args.paths)
        if args.json:
            print(json.dumps({"corpus": corpus, "runs": found}))
        else:
            what = (
                f"manifest sha256 {corpus['manifest_sha256']}"
                if corpus["manifest_sha256"]
                else "a pipeline output: shards its runs wrote"
            )
            print(f"{corpus['path']} ({what}): {len(found)} run(s) and exported model(s) trained on it")
            for r in found:
                what = f"exported model of {r['run']}" if r["exported"] else "run"
                print(f"  {r['path']}  ({what}; source {', '.join(r['sources'])})")
        return 0
    if len(args.paths) > 1:
        raise UsageError("give one model, run or checkpoint (several folders go with --uses)")
    record = read_lineage(args.paths[0])
    print(json.dumps(record) if args.json else format_lineage(record))
    return 0
