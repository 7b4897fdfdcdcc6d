"""Evaluation during training (a training config's ``eval:`` section): lm-evaluation-harness tasks and
held-out document sets in bits per byte, every ``eval.every_steps`` steps and at the end of the run.

Every rank takes part, whatever the layout: each gathers the whole weights from the shards (FSDP, TP:
``full_tensor``; pipeline stages: exchanged over the pipeline group), builds the plain model on its device
and scores its share of the task requests and documents; the harness and an all-reduce put the shares
together, so the numbers are those of a one-process evaluation of the same weights. Each rank holds one
whole copy of the model meanwhile. One record per evaluation, ``kind: eval``, with ``TASK/METRIC`` and
``NAME/bpb`` fields (``tiny_mc/acc``, ``held_out/bpb``) and ``eval_seconds``, the seconds it took.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from pretrain.config.train import EvalConfig, TrainConfig
from pretrain.distributed.parallel_dims import ParallelDims
from pretrain.models.llama import parameter_name


def full_weights(model: torch.nn.Module, dims: ParallelDims) -> dict[str, torch.Tensor]:
    """The whole model's weights (our names) on every rank, on the CPU; a collective: every rank calls it."""
    weights = {}
    for name, p in model.named_parameters():
        tensor = p.full_tensor() if isinstance(p, DTensor) else p
        weights[parameter_name(name)] = tensor.detach().to("cpu", copy=True)
    group = dims.group("pp")
    if group is not None:  # each pipeline rank holds its stages: the union over the pipeline group
        gathered = [None] * dist.get_world_size(group)
        dist.all_gather_object(gathered, weights, group=group)
        weights = {k: v for part in gathered for k, v in part.items()}
    return weights


class InLoopEval:
    """The ``eval:`` section's tasks and documents, read once, scored when due (``due``, ``run``)."""

    def __init__(self, cfg: TrainConfig, device: torch.device, precision: str, dims: ParallelDims):
        from pretrain.inference.evaluate import read_documents
        from pretrain.inference.generate import document_prefix
        from pretrain.inference.loading import Trained, find_tokenizer

        self.section: EvalConfig = cfg.eval
        self.cfg, self.device, self.precision, self.dims = cfg, device, precision, dims
        if self.section.tasks:
            import lm_eval  # noqa: F401  -- a missing extra fails here, before the first step

        # the data sources' tokenizer (the run folder's copy may not be written yet)
        self.tokenizer, manifest = find_tokenizer(Trained({}, cfg.model, cfg, cfg.out_dir, None))
        self.add_bos, self.prefix = bool(manifest.get("add_bos")), document_prefix(self.tokenizer, manifest)
        self.documents = {
            name: read_documents(path, self.section.text_field, f"eval.documents.{name}")[0].column("text").to_pylist()
            for name, path in self.section.documents.items()
        }

    def due(self, step: int, last: int) -> bool:
        """On multiples of ``every_steps`` and at the run's last step (only there when ``every_steps`` is 0)."""
        every = self.section.every_steps
        return step == last or (every > 0 and step % every == 0)

    def run(self, model: torch.nn.Module, step: int) -> dict:
        """Score the training model's current weights; the same record on every rank."""
        from pretrain.inference.bits_per_byte import document_bits_per_byte
        from pretrain.inference.loading import Trained, model_for_inference

        started = time.perf_counter()
        weights = full_weights(model, self.dims)
        if self.cfg.model.tie_embeddings:
            weights.setdefault("output.weight", weights["tok_embeddings.weight"])
        plain = model_for_inference(Trained(weights, self.cfg.model, None, f"step {step}", step), self.device)
        record = {"kind": "eval", "step": step}
        section = self.section
        for name, texts in self.documents.items():
            scored = document_bits_per_byte(
                plain, self.tokenizer, texts, self.prefix, self.cfg.seq_len, section.batch_size, self.precision
            )
            record[f"{name}/bpb"] = scored["bits_per_byte"]
        if section.tasks:
            from pretrain.inference.harness import evaluate_tasks

            scores = evaluate_tasks(
                plain,
                self.tokenizer,
                section.tasks,
                section.include_path,
                section.limit,
                section.num_fewshot,
                self.add_bos,
                section.batch_size,
                self.precision,
            )
            record.update(
                {f"{task}/{metric}": value for task, metrics in scores.items() for metric, value in metrics.items()}
            )
        del plain, weights
        record["eval_seconds"] = time.perf_counter() - started
        return record
