"""``dataprep train-classifier``: train a fastText classifier from labelled JSONL (one record per example)."""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", required=True, nargs="+", help="labelled JSONL file(s), .gz allowed")
    parser.add_argument("--output", required=True, help="model file to write (.bin)")
    parser.add_argument("--text-field", default="text")
    parser.add_argument("--label-field", default="label")
    parser.add_argument("--heldout", type=float, default=0.1, help="share of examples kept aside to report accuracy (0 to skip)")
    parser.add_argument("--epoch", type=int, default=None)
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--dim", type=int, default=None)
    parser.add_argument("--word-ngrams", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)


def main(args: argparse.Namespace) -> int:
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
    random.Random(args.seed).shuffle(examples)
    n_held = int(len(examples) * args.heldout) if args.heldout > 0 else 0
    held, train = examples[:n_held], examples[n_held:]
    params = {k: v for k, v in {"epoch": args.epoch, "lr": args.lr, "dim": args.dim, "wordNgrams": args.word_ngrams}.items() if v is not None}
    model = FastTextClassifier.train([t for t, _ in train], [l for _, l in train], args.output, seed=args.seed, **params)
    report = {"output": args.output, "labels": dict(Counter(l for _, l in train)), "train_examples": len(train)}
    if held:
        predicted = model.model.predict([" ".join(t.split()) for t, _ in held])[0]
        correct = sum(p[0].removeprefix("__label__") == l for p, (_, l) in zip(predicted, held))
        report.update(heldout_examples=len(held), heldout_accuracy=round(correct / len(held), 4))
    print(json.dumps(report, indent=2))
    return 0
