"""One ablation model's scores: bits per byte on each held-out document set (``EVALSET/bpb``) and, per
harness task, accuracy (``TASK/acc``) and DataDecide's continuous measure, the probability the model gives
the correct answer among the choices (``TASK/correct_prob``)."""

from __future__ import annotations

import math
import os


def eval_name(path: str) -> str:
    """A held-out set's name in the measures: the file's name up to its first dot."""
    return os.path.basename(path.rstrip("/")).split(".")[0]


def read_eval_sets(paths: list[str], text_field: str) -> dict[str, list[str]]:
    """``{name: texts}`` of the held-out JSONL/Parquet documents."""
    from pretrain.inference.evaluate import read_documents

    return {eval_name(p): read_documents(p, text_field, "--eval")[0].column("text").to_pylist() for p in paths}


def score_model(run_dir: str, tokenizer, eval_sets: dict[str, list[str]], spec) -> dict[str, float]:
    """The measures of the model trained in ``run_dir``."""
    from pretrain.components.device import resolve_device, resolve_precision
    from pretrain.inference.bits_per_byte import document_bits_per_byte
    from pretrain.inference.generate import document_prefix
    from pretrain.inference.loading import load_trained, model_for_inference

    device = resolve_device(spec.device)
    precision = resolve_precision("auto", device)
    model = model_for_inference(load_trained(run_dir), device)
    scores = {}
    for name, texts in eval_sets.items():
        scored = document_bits_per_byte(
            model, tokenizer, texts, document_prefix(tokenizer, {}), spec.seq_len, spec.micro_batch_size, precision
        )
        scores[f"{name}/bpb"] = scored["bits_per_byte"]
    if spec.tasks:
        scores.update(_task_scores(model, tokenizer, spec, precision))
    return scores


def _task_scores(model, tokenizer, spec, precision: str) -> dict[str, float]:
    from pretrain.inference.harness import evaluate_tasks

    found = evaluate_tasks(
        model,
        tokenizer,
        spec.tasks,
        spec.include_path,
        spec.limit,
        batch_size=spec.micro_batch_size,
        precision=precision,
        log_samples=True,
    )
    samples = found.pop("_samples", {})
    scores = {}
    for task, metrics in found.items():
        if metrics.get("acc") is not None:
            scores[f"{task}/acc"] = metrics["acc"]
        probs = [p for s in samples.get(task, []) if (p := correct_prob(s)) is not None]
        if probs:
            scores[f"{task}/correct_prob"] = sum(probs) / len(probs)
    return scores


def correct_prob(sample: dict) -> float | None:
    """The softmax over a multiple-choice item's log-likelihoods, at the correct choice; None for items of
    other kinds."""
    target = sample.get("target")
    lls = [r[0] if isinstance(r, (list, tuple)) else r for r in sample.get("filtered_resps") or []]
    if not isinstance(target, int) or not 0 <= target < len(lls) or len(lls) < 2:
        return None
    top = max(lls)
    weights = [math.exp(ll - top) for ll in lls]
    return weights[target] / sum(weights)
