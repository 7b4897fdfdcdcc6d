"""``dataprep train-classifier``: train a fastText classifier, either from labelled JSONL (one record per
example) or from reference text, DCLM's way: ``--positives`` (the text you want more of) against
``--negatives`` sampled at random on Spark from a pipeline output or extracted crawl. The reference
mode uses the DCLM recipe (``dataprep.classify.reference``) unless told otherwise and prints the
held-out precision and recall at the thresholds that keep 10, 20 and 50%."""

from __future__ import annotations

import argparse
import json
import sys

from dataprep.classify.reference import read_texts
from dataprep.classify.training import by_language, language_model_path, read_labelled, train_labelled, train_reference
from dataprep.core.arguments import fraction, output_file, positive_float, positive_int, spark_master
from dataprep.core.errors import UsageError
from pipelines.sample_texts import read_documents, sample_texts
from pipelines.spark import get_spark


def add_arguments(parser: argparse.ArgumentParser) -> None:
    examples = parser.add_argument_group("examples")
    fasttext = parser.add_argument_group("fastText")
    source = examples.add_mutually_exclusive_group(required=True)
    source.add_argument("--input", nargs="+", help="labelled JSONL file(s), .gz allowed")
    source.add_argument(
        "--positives", nargs="+", help="reference text: JSONL, Parquet or plain-text (one document a line) files"
    )
    examples.add_argument(
        "--negatives",
        nargs="+",
        help="with --positives: a pipeline output (Parquet) or crawl text (JSONL) sampled on Spark",
    )
    examples.add_argument(
        "--negatives-count", type=positive_int, default=None, help="negatives to sample (default: as many as positives)"
    )
    examples.add_argument(
        "--languages",
        default=None,
        help="with --positives: comma-separated languages, one model each (OUTPUT with .LANG before .bin)",
    )
    parser.add_argument("--output", type=output_file, required=True, help="model file to write (.bin)")
    examples.add_argument("--text-field", default="text")
    examples.add_argument("--label-field", default="label")
    fasttext.add_argument(
        "--heldout", type=fraction, default=0.1, help="share of examples kept aside to report accuracy (0 to skip)"
    )
    fasttext.add_argument("--epoch", type=positive_int, default=None)
    fasttext.add_argument("--lr", type=positive_float, default=None)
    fasttext.add_argument("--dim", type=positive_int, default=None)
    fasttext.add_argument("--word-ngrams", type=positive_int, default=None)
    fasttext.add_argument("--min-count", type=positive_int, default=None)
    fasttext.add_argument("--bucket", type=positive_int, default=None)
    fasttext.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="fastText threads (1: the same model from the same seed every time)",
    )
    fasttext.add_argument("--seed", type=int, default=0)
    examples.add_argument(
        "--master", type=spark_master, default=None, help="Spark master for sampling negatives (default local[*])"
    )


def _overrides(args: argparse.Namespace) -> dict:
    """fastText's settings given on the command line, in fastText's names."""
    given = {
        "epoch": args.epoch,
        "lr": args.lr,
        "dim": args.dim,
        "wordNgrams": args.word_ngrams,
        "minCount": args.min_count,
        "bucket": args.bucket,
        "thread": args.threads,
    }
    return {k: v for k, v in given.items() if v is not None}


def main(args: argparse.Namespace) -> int:
    if args.positives:
        return _from_reference(args)
    if args.negatives:
        raise UsageError("--negatives goes with --positives (labelled --input files carry their own labels)")
    examples, skipped = read_labelled(args.input, args.text_field, args.label_field)
    if skipped:
        print(f"skipped {skipped} records without text or label", file=sys.stderr)
    print(json.dumps(train_labelled(examples, args.output, args.heldout, args.seed, _overrides(args)), indent=2))
    return 0


def _from_reference(args: argparse.Namespace) -> int:
    """Positives from the reference, negatives sampled on Spark, one model (or one per language)."""
    if not args.negatives:
        raise UsageError("--positives needs --negatives: a pipeline output or crawl text to sample pages from")
    positives, missing = read_texts(args.positives, args.text_field)
    if missing:
        print(f"skipped {missing} reference records without text", file=sys.stderr)
    if not positives:
        raise UsageError(f"no reference text in {args.positives}")
    count = args.negatives_count or len(positives)
    spark = get_spark(args.master, app_name="train-classifier")
    negatives = list(sample_texts(read_documents(spark, args.negatives, args.text_field), count, args.seed)[0])
    if not negatives:
        raise UsageError(f"no document with a {args.text_field!r} text in {args.negatives}")
    if len(negatives) < count:
        print(f"asked for {count} negatives, the input holds {len(negatives)}", file=sys.stderr)
    if not args.languages:
        print(
            json.dumps(
                train_reference(positives, negatives, args.output, args.heldout, args.seed, _overrides(args)), indent=2
            )
        )
        return 0
    languages = [x.strip() for x in args.languages.split(",") if x.strip()]
    for lang, (pos, neg) in by_language(positives, negatives, languages).items():
        report = train_reference(
            pos, neg, language_model_path(args.output, lang), args.heldout, args.seed, _overrides(args)
        )
        print(json.dumps(report, indent=2))
    return 0
