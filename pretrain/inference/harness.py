"""Downstream tasks through EleutherAI's lm-evaluation-harness, in process: our model as an ``lm_eval`` model.

``HarnessModel`` scores requests the way the harness's own Hugging Face model (``HFLM``) scores the
``pretrain export`` of the same checkpoint, so the numbers are the harness's: contexts and continuations
encoded together and split (``TemplateLM._encode_pair``), an empty context conditioned on BOS (else
EOS), inputs truncated from the left to the model's ``max_seq_len``, rolling log-likelihood over the
harness's windows, greedy generation up to the task's stop strings. ``evaluate_tasks`` runs named
tasks (the harness's own, or YAML files under ``include_path``) and returns ``{task: {metric: value}}``.
Under ``torch.distributed`` every rank holds the whole model and scores its share of the requests; the
harness gathers them on rank 0 and every rank gets the same scores back. Needs the ``eval`` extra.
"""

from __future__ import annotations

import contextlib
import functools
import math

import torch
import torch.distributed as dist
import torch.nn.functional as F
from lm_eval.api.model import TemplateLM

from dataprep.core.errors import UsageError
from pretrain.inference.generate import generate


class HarnessModel(TemplateLM):
    """Our ``Llama`` (one device, whole weights) and the run's tokenizer, as an ``lm_eval`` model."""

    def __init__(
        self,
        model,
        tokenizer,
        add_bos: bool = False,
        batch_size: int = 16,
        precision: str = "fp32",
        max_gen_toks: int = 256,
    ):
        super().__init__()
        self.model, self.tokenizer, self.add_bos = model.eval(), tokenizer, add_bos
        self.batch_size, self.max_gen_toks = batch_size, max_gen_toks
        self.max_length = model.cfg.max_seq_len
        self._device = model.output.weight.device
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
        self.autocast = (lambda: torch.autocast(self._device.type, dtype=dtype)) if dtype else contextlib.nullcontext
        if dist.is_initialized():
            self._rank, self._world_size = dist.get_rank(), dist.get_world_size()

    @property
    def device(self):
        return self._device

    @property
    def eot_token_id(self) -> int:
        return self.tokenizer.eos_id

    @property
    def prefix_token_id(self) -> int:
        bos = self.tokenizer.bos_id
        return bos if bos is not None and bos >= 0 else self.tokenizer.eos_id

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, **kwargs) -> list[int]:
        """The tokenizer's ids, with BOS first when the training data had one (as the exported tokenizer adds
        it), unless the text already starts with the BOS token's text or ``add_special_tokens`` is False."""
        ids = self.tokenizer.encode(string)
        if add_special_tokens is None:
            add_special_tokens = self.add_bos and not string.startswith(self._bos_text())
        return [self.tokenizer.bos_id] + ids if add_special_tokens and self.add_bos else ids

    def _bos_text(self) -> str:
        sp = getattr(self.tokenizer, "sp", None)
        return (
            sp.id_to_piece(self.tokenizer.bos_id)
            if sp is not None
            else self.tokenizer.tk.id_to_token(self.tokenizer.bos_id)
        )

    @torch.no_grad()
    def _score(self, inputs: list[list[int]], continuations: list[list[int]]) -> list[tuple[float, bool]]:
        """(sum of log p, greedy?) of each continuation, the last tokens each input predicts: one batch, right
        padding (causal: never seen by the positions kept), log-softmax in fp32 of the scored positions only."""
        batch = torch.zeros(len(inputs), max(map(len, inputs)), dtype=torch.long)
        for row, ids in zip(batch, inputs):
            row[: len(ids)] = torch.tensor(ids)
        with self.autocast():
            logits = self.model(batch.to(self._device))
        scores = []
        for row, ids, continuation in zip(logits, inputs, continuations):
            logprobs = F.log_softmax(row[len(ids) - len(continuation) : len(ids)].float(), dim=-1)
            target = torch.tensor(continuation, device=logprobs.device)
            scores.append(
                (float(logprobs.gather(1, target[:, None]).sum()), bool((logprobs.argmax(-1) == target).all()))
            )
        return scores

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kwargs) -> list[tuple[float, bool]]:
        """(sum of log p(continuation | context), whether greedy decoding gives the continuation) per request;
        longest first, in batches, answers in the requests' order."""
        order = sorted(range(len(requests)), key=lambda i: -len(requests[i][1] + requests[i][2]))
        results: list[tuple[float, bool] | None] = [None] * len(requests)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            # the last max_length + 1 tokens: the input drops the final one (nothing left to predict)
            inputs = [(requests[i][1] + requests[i][2])[-(self.max_length + 1) :][:-1] for i in chunk]
            for i, score in zip(chunk, self._score(inputs, [requests[i][2] for i in chunk])):
                results[i] = score
        return results

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        """Log-likelihood of each whole text: the harness's disjoint windows of ``max_length`` tokens."""
        from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

        windows, owners = [], []
        for i, (text,) in enumerate(req.args for req in requests):
            for context, continuation in map(
                make_disjoint_window,
                get_rolling_token_windows(self.tok_encode(text), self.prefix_token_id, self.max_length, context_len=1),
            ):
                windows.append((None, context, continuation))
                owners.append(i)
        totals = [0.0] * len(requests)
        for owner, (logprob, _) in zip(owners, self._loglikelihood_tokens(windows)):
            totals[owner] += logprob
        return totals

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        """Greedy continuations, cut at the first stop string (and at EOS)."""
        answers = []
        for context, kwargs in (req.args for req in requests):
            kwargs = dict(kwargs or {})
            until = kwargs.get("until") or []
            until = [until] if isinstance(until, str) else list(until)
            max_new = int(kwargs.get("max_gen_toks", self.max_gen_toks))
            ids = self.tok_encode(context)[-max(1, self.max_length - max_new) :]
            new = generate(
                self.model, ids, max_new, greedy=True, stop_id=self.eot_token_id, vocab_limit=self.tokenizer.vocab_size
            )
            text = self.tokenizer.decode([t for t in new if t != self.eot_token_id])
            for stop in until:
                text = text.split(stop)[0] if stop else text
            answers.append(text)
        return answers

    def all_gather(self, tensor: torch.Tensor) -> torch.Tensor:
        gathered = [torch.empty_like(tensor) for _ in range(self.world_size)]
        dist.all_gather(gathered, tensor)
        return torch.stack(gathered)

    def gather_object(self, obj, dst: int = 0):
        gathered = [None] * self.world_size if self.rank == dst else None
        dist.gather_object(obj, gathered, dst=dst)
        return gathered

    def barrier(self) -> None:
        dist.barrier()


def metric_name(key: str) -> str | None:
    """The harness's ``acc,none`` as ``acc``; None for what is not a score (alias, sample_len, standard errors)."""
    name = key.split(",")[0]
    return None if name in ("alias", "sample_len") or name.endswith("_stderr") else name


def evaluate_tasks(
    model,
    tokenizer,
    tasks: list[str],
    include_path: str | None = None,
    limit: float | None = None,
    num_fewshot: int | None = None,
    add_bos: bool = False,
    batch_size: int = 16,
    precision: str = "fp32",
    log_samples: bool = False,
) -> dict:
    """Scores of ``tasks`` for our model: ``{task: {metric: value}}`` (metric names without the filter
    suffix; non-finite values as None), plus ``"_samples"`` (the harness's per-item records) when
    ``log_samples``. Every rank of a process group takes part and gets the same answer."""
    from lm_eval import simple_evaluate

    if not tasks:
        raise ValueError("no tasks to evaluate")
    manager = task_manager(tuple(tasks), include_path)
    lm = HarnessModel(model, tokenizer, add_bos, batch_size, precision)
    with _random_state_kept():  # the harness seeds the global generators; a run in progress keeps its own
        output = simple_evaluate(
            lm,
            tasks=list(tasks),
            num_fewshot=num_fewshot,
            limit=limit,
            task_manager=manager,
            log_samples=log_samples,
            bootstrap_iters=0,
        )
    scores = None
    if output is not None:  # rank 0
        scores = {
            task: {
                name: _finite(value)
                for key, value in metrics.items()
                if (name := metric_name(key)) is not None and isinstance(value, (int, float))
            }
            for task, metrics in output["results"].items()
        }
        if log_samples:
            scores["_samples"] = output["samples"]
    if dist.is_initialized() and dist.get_world_size() > 1:
        shared = [scores]
        dist.broadcast_object_list(shared, src=0)
        scores = shared[0]
    return scores


def correct_probability(samples: list[dict]) -> float | None:
    """DataDecide's continuous measure of a multiple-choice task: the mean over items of the probability the
    model gives the right answer among the choices (softmax of the choices' log-likelihoods), from the
    harness's logged samples (``evaluate_tasks(..., log_samples=True)["_samples"][TASK]``); None for a task
    that is not multiple choice."""
    probabilities = []
    for sample in samples:
        target = sample.get("target")
        if not isinstance(target, int) or len(sample["resps"]) < 2:
            return None
        logprobs = torch.tensor([float(resp[0][0]) for resp in sample["resps"]], dtype=torch.float64)
        probabilities.append(float(torch.softmax(logprobs, 0)[target]))
    return sum(probabilities) / len(probabilities) if probabilities else None


@functools.lru_cache(maxsize=8)
def task_manager(tasks: tuple[str, ...], include_path: str | None):
    """The harness's task index holding ``tasks``: the local folder alone when it has them all (indexing
    the harness's own thousands of task files takes most of a minute), else with the harness's own;
    kept, so evaluation during training indexes once."""
    from lm_eval.tasks import TaskManager

    if include_path:
        local = TaskManager(include_path=include_path, include_defaults=False)
        if set(tasks) <= set(local.all_tasks):
            return local
    manager = TaskManager(include_path=include_path)
    unknown = [t for t in tasks if t not in manager.all_tasks]
    if unknown:
        where = (
            f" or under --include-path {include_path}" if include_path else " (a local task YAML: --include-path DIR)"
        )
        raise UsageError(f"unknown task {', '.join(unknown)}: not a task of lm-evaluation-harness{where}")
    return manager


@contextlib.contextmanager
def _random_state_kept():
    """Python's, numpy's and torch's global random generators as they were before."""
    import random

    import numpy as np

    saved = random.getstate(), np.random.get_state(), torch.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    try:
        yield
    finally:
        random.setstate(saved[0])
        np.random.set_state(saved[1])
        torch.set_rng_state(saved[2])
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None
