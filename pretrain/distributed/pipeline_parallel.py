"""Pipeline parallelism with ``torch.distributed.pipelining``: the blocks split into contiguous stages over
the "pp" dimension of the mesh, run by a schedule (GPipe, 1F1B, interleaved 1F1B, zero bubble).

Each stage is a ``Llama`` built on the meta device with the other stages' blocks deleted (embeddings
stay on the first stage, final norm and head on the last), then parallelized (TP, FSDP) and initialised
like the whole model: parameter names are unchanged, so a checkpoint (DCP, by name) resumes at any pp
size and the initial weights equal the single-process ones. A rank holds one stage, or several for the
interleaved and zero-bubble schedules (looped: stage s on rank s mod pp). ``RankStages`` shows a rank's stages as one
module with the whole model's names, for the optimizer and the checkpoint. The micro-batches of a step are its
gradient-accumulation micro-batches; the schedules divide gradients by their count (the mean over micro-batches, as
without a pipeline).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from dataprep.core.errors import UsageError
from pretrain.components.loss import cross_entropy
from pretrain.config.model import ModelConfig
from pretrain.config.train import TrainConfig
from pretrain.distributed.parallel_dims import ParallelDims
from pretrain.distributed.parallelize import parallelize
from pretrain.layout_rules import MULTI_STAGE_SCHEDULES
from pretrain.models.llama import Llama, block_params

SCHEDULE_CLASSES = {
    "gpipe": "GPipe",
    "1f1b": "1F1B",
    "interleaved_1f1b": "Interleaved1F1B",
    "interleaved_zero_bubble": "InterleavedZeroBubble",
}


def split_layers(cfg: ModelConfig, n_stages: int) -> list[range]:
    """Contiguous blocks per stage, at least one each, minimising the costliest stage's FLOPs: a block
    costs its parameters, the last stage also the output head (the embedding lookup costs nothing)."""
    n = cfg.n_layers
    if n < n_stages:
        raise UsageError(f"{n} layers cannot fill {n_stages} pipeline stages")
    block = block_params(cfg, norms=False)
    head = cfg.d_model * cfg.vocab_size

    # best[s][i]: the lowest max cost of blocks i.. in stages s..; stage cost = blocks (+ head if last)
    inf = float("inf")
    best = [[inf] * (n + 1) for _ in range(n_stages + 1)]
    cut = [[0] * (n + 1) for _ in range(n_stages + 1)]
    best[n_stages][n] = 0.0
    for s in range(n_stages - 1, -1, -1):
        extra = head if s == n_stages - 1 else 0
        for i in range(n - 1, -1, -1):
            for j in range(i + 1, n - (n_stages - 1 - s) + 1):  # leave a block for each later stage
                cost = max((j - i) * block + extra, best[s + 1][j])
                if cost < best[s][i]:
                    best[s][i], cut[s][i] = cost, j
    out, i = [], 0
    for s in range(n_stages):
        out.append(range(i, cut[s][i]))
        i = cut[s][i]
    return out


def stage_indices(pp_rank: int, pp: int, per_rank: int) -> list[int]:
    """The stages rank ``pp_rank`` runs, looped: stage s on rank s mod pp."""
    return [pp_rank + k * pp for k in range(per_rank)]


class RankStages(nn.Module):
    """A rank's stages as one module with the whole model's parameter names (``tok_embeddings``,
    ``layers.N...``, ``norm``, ``output``): what the optimizer, the checkpoint and the grad norm see."""

    def __init__(self, stages: list[Llama]):
        super().__init__()
        self.layers = nn.ModuleDict()
        for stage in stages:
            for name in ("tok_embeddings", "norm", "output"):
                if getattr(stage, name) is not None:
                    setattr(self, name, getattr(stage, name))
            self.layers.update(stage.layers)


@dataclass
class PipelineParallelModel:
    """This rank's stages and the schedule that runs them."""

    schedule: object
    stages: list[Llama]
    module: RankStages
    has_first: bool
    has_last: bool
    # the first run of the schedule infers the stages' shapes with a forward pass on placeholder tensors
    shapes_known: bool = False

    def step(self, micro_batches: list[torch.Tensor], ctx, forward_only: bool = False) -> torch.Tensor:
        """Forward (and backward) over the micro-batches (``ctx``: a ``pretrain.train_step.TrainStepContext``);
        returns the mean loss on the rank holding the last stage, else zero (no host sync). With a document
        mask the documents go to every stage as a keyword argument, split into micro-batches by the schedule
        like the inputs: a later stage receives only hidden states from the one before, but each rank
        loads the same batch."""
        batch = torch.cat(micro_batches).to(ctx.device, non_blocking=True)
        document_kwargs = {}
        if batch.ndim == 3:  # each token's document (data.document_mask): every stage gets its micro-batch's rows
            batch, document_kwargs = (
                batch[:, 0],
                {"documents": batch[:, 1, :-1], "restart_positions": ctx.document_positions},
            )
        inputs, targets = batch[:, :-1], batch[:, 1:]
        losses: list[torch.Tensor] = []
        run = self.schedule.eval if forward_only else self.schedule.step
        with ctx.autocast(), ctx.loss_ctx():
            run(
                *([inputs] if self.has_first else []),
                target=targets if self.has_last else None,
                losses=losses,
                **document_kwargs,
            )
        self.shapes_known = True
        if not self.has_last:
            return torch.zeros((), device=ctx.device)
        return torch.stack([loss.detach() for loss in losses]).mean()


def build_pipeline(
    cfg: TrainConfig, dims: ParallelDims, device: torch.device, param_dtype: torch.dtype | None, micro_batches: int
) -> PipelineParallelModel:
    """Build, parallelize and initialise this rank's stages on the mesh ``dims`` built, and their schedule
    over ``micro_batches`` per step."""
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import get_schedule_class

    par = cfg.parallel
    if par.pp_schedule == "interleaved_zero_bubble" and dims.fsdp_enabled:  # dp_shard: -1 resolved
        raise UsageError(
            f"parallel.pp_schedule interleaved_zero_bubble does not compose with FSDP (dp_shard "
            f"{dims.dp_shard}, dp_replicate {dims.dp_replicate}) in torch 2.13: use interleaved_1f1b"
        )
    n_stages = par.num_stages
    layers = split_layers(cfg.model, n_stages)
    group = dims.mesh["pp"].get_group()
    stages, modules = [], []
    for s in stage_indices(dims.local_rank("pp"), dims.pp, par.pp_stages_per_rank):
        with torch.device("meta"):
            model = Llama(cfg.model)
        for name in list(model.layers):
            if int(name) not in layers[s]:
                del model.layers[name]
        if s > 0:
            model.tok_embeddings = None
        if s < n_stages - 1:
            model.norm = model.output = None
        parallelize(model, dims, par, param_dtype)
        model.to_empty(device=device)
        model.init_weights(cfg.seed)
        modules.append(model)
        stages.append(PipelineStage(model, s, n_stages, device, group=group))
    schedule_class = get_schedule_class(SCHEDULE_CLASSES[par.pp_schedule])
    try:
        schedule = schedule_class(
            stages if par.pp_schedule in MULTI_STAGE_SCHEDULES else stages[0], micro_batches, loss_fn=cross_entropy
        )
    except ValueError as exc:
        raise UsageError(
            f"pipeline schedule {par.pp_schedule} with pp={dims.pp} and {micro_batches} micro-batches per step: {exc}"
        ) from None
    indices = [stage.stage_index for stage in stages]
    return PipelineParallelModel(schedule, modules, RankStages(modules), 0 in indices, n_stages - 1 in indices)
