"""Training a fastText classifier from labelled examples or from reference text against negatives
(``dataprep train-classifier``, whose command samples the negatives on Spark). No Spark here."""

from __future__ import annotations

import random
import sys
from collections import Counter

from dataprep.core.errors import UsageError
from dataprep.core.inputs import read_jsonl_records


def split_heldout(examples: list[tuple[str, str]], heldout: float, seed: int) -> tuple[list, list]:
    """(held-out, training) examples: a seeded shuffle, then the first ``heldout`` share set aside."""
    random.Random(seed).shuffle(examples)
    n_held = int(len(examples) * heldout) if heldout > 0 else 0
    return examples[:n_held], examples[n_held:]


def read_labelled(
    paths: list[str], text_field: str = "text", label_field: str = "label"
) -> tuple[list[tuple[str, str]], int]:
    """(text, label) pairs of JSONL files, and how many records lacked a text or a label."""
    examples, skipped = [], 0
    for record, _, _ in read_jsonl_records(paths):
        text = record.get(text_field) if record else None
        label = record.get(label_field) if record else None
        if isinstance(text, str) and text.strip() and label not in (None, ""):
            examples.append((text, str(label)))
        else:
            skipped += 1
    return examples, skipped


def train_labelled(
    examples: list[tuple[str, str]], output: str, heldout: float = 0.1, seed: int = 0, params: dict | None = None
) -> dict:
    """A model from labelled examples, written to ``output``; its report, with the held-out accuracy."""
    from dataprep.classify.fasttext_classifier import FastTextClassifier

    held, train = split_heldout(examples, heldout, seed)
    model = FastTextClassifier.train(
        [t for t, _ in train], [label for _, label in train], output, seed=seed, **(params or {})
    )
    report = {"output": output, "labels": dict(Counter(label for _, label in train)), "train_examples": len(train)}
    if held:
        predicted = model.model.predict([" ".join(t.split()) for t, _ in held])[0]
        correct = sum(p[0].removeprefix("__label__") == label for p, (_, label) in zip(predicted, held))
        report.update(heldout_examples=len(held), heldout_accuracy=round(correct / len(held), 4))
    return report


def train_reference(
    positives: list[str],
    negatives: list[str],
    output: str,
    heldout: float = 0.1,
    seed: int = 0,
    params: dict | None = None,
) -> dict:
    """A model of reference text against negatives (DCLM's recipe, ``params`` over it), written to ``output``;
    its report, with held-out precision and recall at the shares kept (printed to stderr too)."""
    from dataprep.classify.fasttext_classifier import FastTextClassifier
    from dataprep.classify.reference import DCLM_RECIPE, NEGATIVE, POSITIVE, format_report, precision_recall_at_shares

    examples = [(t, POSITIVE) for t in positives] + [(t, NEGATIVE) for t in negatives]
    held, train = split_heldout(examples, heldout, seed)
    recipe = {**DCLM_RECIPE, **(params or {})}
    model = FastTextClassifier.train([t for t, _ in train], [label for _, label in train], output, seed=seed, **recipe)
    report = {
        "output": output,
        "recipe": recipe,
        "labels": dict(Counter(label for _, label in train)),
        "train_examples": len(train),
    }
    if held:
        scores = model.score([t for t, _ in held], POSITIVE)
        rows = precision_recall_at_shares(scores, [label == POSITIVE for _, label in held])
        report.update(heldout_examples=len(held), heldout=rows)
        print(
            f"held out: {len(held)} examples ({sum(label == POSITIVE for _, label in held)} "
            f"reference)\n{format_report(rows)}",
            file=sys.stderr,
        )
    return report


def by_language(
    positives: list[str], negatives: list[str], languages: list[str]
) -> dict[str, tuple[list[str], list[str]]]:
    """Positives and negatives of each language (lid.176's prediction); both must hold some of each."""
    from dataprep.classify.langid import LanguageID

    detect = LanguageID()
    pos_langs, _ = detect.predict(positives)
    neg_langs, _ = detect.predict(negatives)
    split = {}
    for lang in languages:
        pos = [t for t, found in zip(positives, pos_langs) if found == lang]
        neg = [t for t, found in zip(negatives, neg_langs) if found == lang]
        if not pos or not neg:
            raise UsageError(f"language {lang!r}: {len(pos)} reference texts and {len(neg)} negatives; both are needed")
        split[lang] = (pos, neg)
    return split


def language_model_path(output: str, lang: str) -> str:
    """Where the model of one language goes: ``model.bin`` -> ``model.en.bin``."""
    stem, dot, ext = output.rpartition(".")
    return f"{stem}.{lang}.{ext}" if dot and "/" not in ext else f"{output}.{lang}"
