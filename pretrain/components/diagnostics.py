"""Per-layer diagnostics (``log.diagnostics_every_steps``): for the embeddings, each block and the head,
the gradient norm (before clipping), the parameter norm and the update-to-weight ratio of the step
(||W after - W before|| / ||W before||); for the embeddings and each block, the RMS and max |x| of the
residual stream it outputs; for each block, the largest attention logit max(q.k / sqrt(head_dim)).

Everything is computed on the device on a diagnostic step only (between ``begin`` and ``read``: the model's
probes stay None otherwise, so ordinary steps do no extra work) and read back once: one world-wide sum
(squared norms, activation sums and counts) and one world-wide max (maxima), then one ``tolist``. A
sharded parameter (FSDP, TP: DTensor) adds its local shard's squared norm divided by the number of ranks
holding the same elements, so the sum is exact for any mesh; with pipeline parallelism each stage adds
its own layers and zeros for the rest, so every rank ends with the whole model's values (rank 0 writes).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import partial

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import DTensor, Replicate

from pretrain.models.llama import Attention, parameter_name

QUANTITIES = ("grad_norm", "param_norm", "update_ratio", "act_rms", "act_max", "attn_logit_max")


def layer_names(n_layers: int) -> list[str]:
    """The rows of the diagnostics, input to output: embeddings, block.0 .. block.N-1, head."""
    return ["embeddings", *(f"block.{i}" for i in range(n_layers)), "head"]


def layer_of(parameter: str) -> str:
    """The diagnostics row of a parameter name (``layers.3.attention.wq.weight`` -> ``block.3``); the final
    norm and the output projection are the head."""
    name = parameter_name(parameter)
    if name.startswith("layers."):
        return "block." + name.split(".")[1]
    return "embeddings" if name.startswith("tok_embeddings.") else "head"


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if isinstance(t, DTensor) else t


def copies(t: torch.Tensor, ranks_per_stage: int) -> int:
    """How many ranks hold each element of ``t``: the ranks of its pipeline stage over the number of
    distinct shards (the mesh dimensions it is sharded on; replicated ones hold copies)."""
    shards = 1
    if isinstance(t, DTensor):
        shards = math.prod(t.device_mesh.size(i) for i, placement in enumerate(t.placements) if placement.is_shard())
    return ranks_per_stage // shards


def summed(t: torch.Tensor) -> torch.Tensor:
    """``t`` with its partial sums added up (a tensor-parallel gradient of a replicated weight, such as a
    norm gain, is a partial sum on each rank), so its local part is a piece of the whole."""
    if isinstance(t, DTensor) and any(placement.is_partial() for placement in t.placements):
        return t.redistribute(t.device_mesh, [Replicate() if pl.is_partial() else pl for pl in t.placements])
    return t


@torch.no_grad()
def max_attention_logit(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """max over causal pairs of q.k / sqrt(head_dim), for q (batch, heads, seq, head_dim) and k with
    ``heads / groups`` heads (grouped-query attention); one head at a time, so at most one (batch, seq,
    seq) score matrix is held."""
    heads, seq, head_dim = q.size(1), q.size(2), q.size(3)
    group = heads // k.size(1)
    above = torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu(1)
    best = torch.full((), -math.inf, device=q.device)
    for h in range(heads):
        scores = q[:, h].float() @ k[:, h // group].float().transpose(-1, -2)
        best = torch.maximum(best, scores.masked_fill(above, -math.inf).amax())
    return best / math.sqrt(head_dim)


class LayerDiagnostics:
    """One run's diagnostics. ``model``: the module whose parameters the optimizer steps (whole-model names);
    ``stages``: the Llama modules that run forward (the model, or this rank's pipeline stages);
    ``logits``: whether attention sees whole sequences (not under context parallelism, where a rank holds
    chunks of q and k)."""

    def __init__(
        self,
        model: nn.Module,
        stages: list[nn.Module],
        n_layers: int,
        device: torch.device,
        ranks_per_stage: int,
        logits: bool = True,
    ):
        self.names = layer_names(n_layers)
        self.row = {name: i for i, name in enumerate(self.names)}
        named = list(model.named_parameters())
        self.params = [p for _, p in named]
        self.rows = torch.tensor([self.row[layer_of(name)] for name, _ in named], device=device)
        self.ranks_per_stage = ranks_per_stage
        self.param_copies = [copies(p, ranks_per_stage) for p in self.params]
        self.stages, self.device = stages, device
        self.attentions = [
            (self.row[f"block.{name}"], module)
            for stage in stages
            if logits
            for name, block in stage.layers.items()
            for module in block.modules()
            if isinstance(module, Attention)
        ]

    def begin(self, activations: bool = True) -> None:
        """Arm the probes for the coming step: each block's output and its attention's q and k (unless not
        ``activations``: a forward pass that also runs on placeholder tensors)."""
        n = len(self.names)
        self.act_sq = torch.zeros(n, device=self.device)
        self.counts = [0] * n
        self.maxima = torch.full((2, n), -math.inf, device=self.device)  # act_max, attn_logit_max
        self.grad_sq = torch.zeros(n, device=self.device)
        self.before: list[torch.Tensor] = []
        for stage in self.stages if activations else ():
            stage.probe = self.residual
        for row, attention in self.attentions if activations else ():
            attention.probe = partial(self.attention_logits, row)

    @torch.no_grad()
    def residual(self, layer: str, h: torch.Tensor) -> None:
        """A layer's output into the residual stream (this rank's part of it)."""
        h, row = _local(h.detach()), self.row[layer]
        self.act_sq[row] += h.float().pow(2).sum()
        self.counts[row] += h.numel()
        self.maxima[0, row] = torch.maximum(self.maxima[0, row], h.abs().amax().float())

    def attention_logits(self, row: int, q: torch.Tensor, k: torch.Tensor) -> None:
        self.maxima[1, row] = torch.maximum(self.maxima[1, row], max_attention_logit(q, k))

    @torch.no_grad()
    def _per_layer(self, tensors: Iterable[torch.Tensor | None], counts: list[int] | None = None) -> torch.Tensor:
        """Squared norms of this rank's parts of the parameters' tensors (one each, in order), summed per
        layer; each element is counted once over the ranks (``counts``: the ranks holding each, by default
        the parameters'). ``.to``: offloaded shards live in host memory (a copy to the device, not a read)."""
        zero = torch.zeros((), device=self.device)
        norms = (
            zero if t is None else torch.linalg.vector_norm(_local(t), dtype=torch.float32).to(self.device)
            for t in tensors
        )
        squares = [norm**2 / n for norm, n in zip(norms, counts or self.param_copies)]
        return torch.zeros(len(self.names), device=self.device).index_add_(0, self.rows, torch.stack(squares))

    @torch.no_grad()
    def gradients(self) -> None:
        """Before clipping and the update: the gradients' norms, and the weights the step starts from."""
        grads = [None if p.grad is None else summed(p.grad) for p in self.params]
        self.grad_sq = self._per_layer(grads, [copies(g, self.ranks_per_stage) for g in grads])
        self.before = [_local(p.detach()).clone() for p in self.params]

    @torch.no_grad()
    def read(self, step: int) -> dict:
        """After the update: the step's ``diagnostics`` record (on every rank), and the probes disarmed."""
        for stage in self.stages:
            stage.probe = None
        for _, attention in self.attentions:
            attention.probe = None
        after = [_local(p.detach()) for p in self.params]
        delta = (a - b for a, b in zip(after, self.before))  # one parameter's update at a time
        sums = torch.stack(
            [
                self.grad_sq,
                self._per_layer(after),
                self._per_layer(delta),
                self._per_layer(self.before),
                self.act_sq,
                torch.tensor(self.counts, dtype=torch.float32, device=self.device),
            ]
        )
        maxima = self.maxima
        if dist.is_initialized() and dist.get_world_size() > 1:
            dist.all_reduce(sums)
            dist.all_reduce(maxima, op=dist.ReduceOp.MAX)
        values = torch.cat([sums.flatten(), maxima.flatten()]).tolist()  # the one read back
        n = len(self.names)
        grad, param, change, before, act_sq, counts = (values[i * n : (i + 1) * n] for i in range(6))
        act_max, logit = values[6 * n : 7 * n], values[7 * n :]
        record: dict = {"kind": "diagnostics", "step": step}
        for i, name in enumerate(self.names):
            record[f"grad_norm/{name}"] = math.sqrt(grad[i])
            record[f"param_norm/{name}"] = math.sqrt(param[i])
            record[f"update_ratio/{name}"] = math.sqrt(change[i] / before[i]) if before[i] > 0 else math.nan
            if counts[i]:
                record[f"act_rms/{name}"] = math.sqrt(act_sq[i] / counts[i])
                record[f"act_max/{name}"] = act_max[i]
            if logit[i] != -math.inf:
                record[f"attn_logit_max/{name}"] = logit[i]
        self.before = []
        return record


def diagnostics_summary(record: dict) -> str:
    """One console line for a diagnostics record: the layer with the largest value of each quantity."""
    parts = []
    for quantity in QUANTITIES:
        values = {key.split("/", 1)[1]: v for key, v in record.items() if key.startswith(quantity + "/")}
        if values:
            layer = max(values, key=lambda k: -math.inf if math.isnan(values[k]) else values[k])
            parts.append(f"{quantity} max {values[layer]:.4g} ({layer})")
    return f"step {record['step']} | diagnostics | " + " | ".join(parts)
