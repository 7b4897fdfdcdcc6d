"""Gradient clipping under FSDP x TP (2 x 2) and under pipeline parallelism x FSDP (2 x 2), 4 gloo processes
on CPU in one torchrun launch (this file is the worker, ``__main__`` below): the global gradient norm, and
every clipped gradient, equal ``torch.nn.utils.clip_grad_norm_`` on one whole model trained on the same
global batch."""

from __future__ import annotations

import json
import os
import sys

import pytest
import torch

from parallel_runs import MODEL, torchrun
from train_fixtures import tiny_config

pytestmark = pytest.mark.slow  # many processes or subprocess CLIs: scripts/test.sh --fast leaves it out

MAX_NORM = 0.05  # below the first step's norm: clipping acts
LAYOUTS = {"fsdp_x_tp": {"dp_shard": 2, "tp": 2}, "pp_x_fsdp": {"pp": 2, "dp_shard": 2}}
GLOBAL_BATCH, MICRO_BATCH = 8, 2


def _reference(cfg, batch: torch.Tensor) -> tuple[float, dict[str, torch.Tensor], float]:
    """The whole model on the whole batch: (its norm, its clipped gradients, the norm after clipping)."""
    from pretrain.components.loss import cross_entropy
    from pretrain.models.llama import Llama

    model = Llama(cfg.model)
    model.init_weights(cfg.seed)
    cross_entropy(model(batch[:, :-1]), batch[:, 1:]).backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM).item()
    after = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()])).item()
    return norm, {name: p.grad for name, p in model.named_parameters()}, after


def _layout_gradients(cfg, batch: torch.Tensor) -> tuple[float, dict[str, torch.Tensor]]:
    """This rank's gradients from the training step's own code, clipped by the loop's clip_grad_norm."""
    from torch.distributed.tensor import DTensor

    from pretrain.components.optimizer import clip_grad_norm
    from pretrain.distributed.parallel_dims import ParallelDims
    from pretrain.distributed.pipeline_parallel import build_pipeline
    from pretrain.models.llama import parameter_name
    from pretrain.train_setup import build_parallel_model
    from pretrain.train_step import TrainStepContext, accumulate_gradients

    dims = ParallelDims.from_config(cfg.parallel, torch.distributed.get_world_size())
    dims.build_mesh("cpu")
    dp = dims.data_parallel()
    per_rank = GLOBAL_BATCH // dp.size
    micro_batches = list(batch[dp.rank * per_rank : (dp.rank + 1) * per_rank].split(MICRO_BATCH))
    if dims.pp_enabled:
        pipe = build_pipeline(cfg, dims, torch.device("cpu"), None, len(micro_batches))
        model, stepper = pipe.module, pipe
    else:
        model = stepper = build_parallel_model(cfg, dims, torch.device("cpu"), "fp32")
    ctx = TrainStepContext(torch.device("cpu"), "fp32", False, fsdp=dims.fsdp_enabled, pp_group=dims.group("pp"))
    accumulate_gradients(stepper, micro_batches, ctx)
    norm = clip_grad_norm(list(model.parameters()), MAX_NORM, ctx.pp_group)
    grads = {
        parameter_name(name): p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad
        for name, p in model.named_parameters()
    }
    return norm.item(), grads


def _worker(out: str, name: str) -> None:
    from pretrain.config.loading import load_train_config
    from pretrain.distributed.process_group import init_distributed

    rank, _, _ = init_distributed("cpu")
    cfg = load_train_config(
        tiny_config(
            "/unused",
            out,
            model=MODEL,
            parallel=LAYOUTS[name],
            micro_batch_size=MICRO_BATCH,
            global_batch_size=GLOBAL_BATCH,
        )
    )
    batch = torch.randint(
        0, MODEL["vocab_size"], (GLOBAL_BATCH, cfg.seq_len + 1), generator=torch.Generator().manual_seed(7)
    )
    ref_norm, ref_grads, ref_after = _reference(cfg, batch)
    norm, grads = _layout_gradients(cfg, batch)
    worst = max((grads[k] - ref_grads[k]).abs().max().item() / ref_grads[k].abs().max().item() for k in grads)
    result = {
        "norm": norm,
        "reference_norm": ref_norm,
        "reference_after": ref_after,
        "names": sorted(grads),
        "worst_relative_error": worst,
    }
    with open(os.path.join(out, f"{name}-rank{rank}.json"), "w") as fh:
        json.dump(result, fh)
    torch.distributed.destroy_process_group()


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("clip")
    for name in LAYOUTS:
        torchrun([os.path.abspath(__file__), str(root), name], timeout=300)
    return {name: [json.loads((root / f"{name}-rank{r}.json").read_text()) for r in range(4)] for name in LAYOUTS}


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_clip_under_parallel_layouts_equals_torch_clip_grad_norm(results, name):
    ranks = results[name]
    for rank in ranks:
        assert rank["reference_norm"] > MAX_NORM  # the cap acts
        assert rank["reference_after"] == pytest.approx(MAX_NORM, rel=1e-4)
        assert rank["norm"] == pytest.approx(rank["reference_norm"], rel=1e-5)
        assert rank["worst_relative_error"] < 1e-4
    held = set().union(*(r["names"] for r in ranks))
    assert "tok_embeddings.weight" in held and "output.weight" in held and "layers.1.attention.wq.weight" in held
    if name == "pp_x_fsdp":  # each stage holds its own blocks only
        assert any("layers.0." not in " ".join(r["names"]) for r in ranks)


if __name__ == "__main__":
    _worker(sys.argv[1], sys.argv[2])
