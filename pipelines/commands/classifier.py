"""``dataprep train-classifier``: train a fastText classifier, either from labelled JSONL (one record per
example) or from reference text, DCLM's way: ``--positives`` (the text you want more of) against
``--negatives`` sampled at random on Spark from a pipeline output or extracted crawl. The reference
mode uses the DCLM recipe (``dataprep.classify.reference``) unless told otherwise and prints the
held-out precision and recall at the thresholds that keep 10, 20 and 50%."""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter

from dataprep.core.arguments import fraction, output_file, positive_float, positive_int, spark_master


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--input", nargs="+", help="labelled JSONL file(s), .gz allowed")
    source.add_argument("--positives", nargs="+", help="reference text: JSONL, Parquet or plain-text (one document a line) files")
    parser.add_argument("--negatives", nargs="+", help="with --positives: a pipeline output (Parquet) or crawl text (JSONL) sampled on Spark")
    parser.add_argument("--negatives-count", type=positive_int, default=None, help="negatives to sample (default: as many as positives)")
    parser.add_argument("--languages", default=None, help="with --positives: comma-separated languages, one model each (OUTPUT with .LANG before .bin)")
    parser.add_argument("--output", type=output_file, required=True, help="model file to write (.bin)")
    parser.add_argument("--text-field", default="text")
    parser.add_argument("--label-field", default="label")
    parser.add_argument("--heldout", type=fraction, default=0.1, help="share of examples kept aside to report accuracy (0 to skip)")
    parser.add_argument("--epoch", type=positive_int, default=None)
    parser.add_argument("--lr", type=positive_float, default=None)
    parser.add_argument("--dim", type=positive_int, default=None)
    parser.add_argument("--word-ngrams", type=positive_int, default=None)
    parser.add_argument("--min-count", type=positive_int, default=None)
    parser.add_argument("--bucket", type=positive_int, default=None)
    parser.add_argument("--threads", type=positive_int, default=None, help="fastText threads (1: the same model from the same seed every time)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--master", type=spark_master, default=None, help="Spark master for sampling negatives (default local[*])")


def _overrides(args: argparse.Namespace) -> dict:
    given = {"epoch": args.epoch, "lr": args.lr, "dim": args.dim, "wordNgrams": args.word_ngrams,
             "minCount": args.min_count, "bucket": args.bucket, "thread": args.threads}
    return {k: v for k, v in given.items() if v is not None}


def _split(examples: list[tuple[str, str]], heldout: float, seed: int) -> tuple[list, list]:
    random.Random(seed).shuffle(examples)
    n_held = int(len(examples) * heldout) if heldout > 0 else 0
    return examples[:n_held], examples[n_held:]


def main(args: argparse.Namespace) -> int:
    if args.positives:
        return _from_reference(args)
    if args.negatives:
        raise SystemExit("--negatives goes with --positives (labelled --input files carry their own labels)")
    from dataprep.classify.fasttext_classifier import FastTextClassifier
    from dataprep.core.storage import read_jsonl_records

    examples, skipped = [], 0
    for record, _, _ in read_jsonl_records(args.input):
        text = record.get(args.text_field) if record else None
        label = record.get(args.label_field) if record else None
        if isinstance(text, str) and text.strip() and label not in (None, ""):
            examples.append((text, str(label)))
        else:
            skipped += 1
    if skipped:
        print(f"skipped {skipped} records without text or label", file=sys.stderr)
    held, train = _split(examples, args.heldout, args.seed)
    model = FastTextClassifier.train([t for t, _ in train], [l for _, l in train], args.output, seed=args.seed, **_overrides(args))
    report = {"output": args.output, "labels": dict(Counter(l for _, l in train)), "train_examples": len(train)}
    if held:
        predicted = model.model.predict([" ".join(t.split()) for t, _ in held])[0]
        correct = sum(p[0].removeprefix("__label__") == l for p, (_, l) in zip(predicted, held))
        report.update(heldout_examples=len(held), heldout_accuracy=round(correct / len(held), 4))
    print(json.dumps(report, indent=2))
    return 0


def _from_reference(args: argparse.Namespace) -> int:
    """Positives from the reference, negatives sampled on Spark, one model (or one per language)."""
    from dataprep.classify.reference import read_texts

    if not args.negatives:
        raise SystemExit("--positives needs --negatives: a pipeline output or crawl text to sample pages from")
    positives, missing = read_texts(args.positives, args.text_field)
    if missing:
        print(f"skipped {missing} reference records without text", file=sys.stderr)
    if not positives:
        raise SystemExit(f"no reference text in {args.positives}")
    count = args.negatives_count or len(positives)
    from pipelines.sample_texts import sample_texts  # the Spark side, imported only when it runs
    from pipelines.spark import get_spark

    negatives = sample_texts(get_spark(args.master, app_name="train-classifier"), args.negatives, count, args.seed, args.text_field)
    if not negatives:
        raise SystemExit(f"no document with a {args.text_field!r} text in {args.negatives}")
    if len(negatives) < count:
        print(f"asked for {count} negatives, the input holds {len(negatives)}", file=sys.stderr)
    if not args.languages:
        _train_one(args.output, positives, negatives, args)
        return 0
    from dataprep.classify.langid import LanguageID

    detect = LanguageID()
    pos_langs, _ = detect.predict(positives)
    neg_langs, _ = detect.predict(negatives)
    for lang in [x.strip() for x in args.languages.split(",") if x.strip()]:
        pos = [t for t, l in zip(positives, pos_langs) if l == lang]
        neg = [t for t, l in zip(negatives, neg_langs) if l == lang]
        if not pos or not neg:
            raise SystemExit(f"language {lang!r}: {len(pos)} reference texts and {len(neg)} negatives; both are needed")
        _train_one(language_model_path(args.output, lang), pos, neg, args)
    return 0


def language_model_path(output: str, lang: str) -> str:
    """Where the model of one language goes: ``model.bin`` -> ``model.en.bin``."""
    stem, dot, ext = output.rpartition(".")
    return f"{stem}.{lang}.{ext}" if dot and "/" not in ext else f"{output}.{lang}"


def _train_one(output: str, positives: list[str], negatives: list[str], args: argparse.Namespace) -> None:
    from dataprep.classify.fasttext_classifier import FastTextClassifier
    from dataprep.classify.reference import DCLM_RECIPE, NEGATIVE, POSITIVE, format_report, precision_recall_at_shares

    examples = [(t, POSITIVE) for t in positives] + [(t, NEGATIVE) for t in negatives]
    held, train = _split(examples, args.heldout, args.seed)
    params = {**DCLM_RECIPE, **_overrides(args)}
    model = FastTextClassifier.train([t for t, _ in train], [l for _, l in train], output, seed=args.seed, **params)
    report = {"output": output, "recipe": params, "labels": dict(Counter(l for _, l in train)), "train_examples": len(train)}
    if held:
        scores = model.score([t for t, _ in held], POSITIVE)
        rows = precision_recall_at_shares(scores, [l == POSITIVE for _, l in held])
        report.update(heldout_examples=len(held), heldout=rows)
        print(f"held out: {len(held)} examples ({sum(l == POSITIVE for _, l in held)} reference)\n{format_report(rows)}", file=sys.stderr)
    print(json.dumps(report, indent=2))
