"""What only shows at scale, reproduced small on CPU: gradient memory under accumulation, host memory of
initialisation and export, fp16 overflow on one rank, the bf16 FSDP policy, selective checkpointing under
tensor parallelism, the gathered weights ZeRO-2 holds, and the configs the mesh cannot run.

Two torchrun launches (gloo, CPU) run this file as a worker (``__main__`` below): 4 ranks for the layouts
(TP-only, FSDP-only, 2 x 2), 2 FSDP ranks for the memory measurements and compile. Each rank writes what it saw to JSON;
the tests read it. Memory is the process's resident size with glibc returning every allocation of
64 KiB or more to the system when freed (MALLOC_MMAP_THRESHOLD_), so it follows live tensors.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from memory_peaks import peak_growth, status_bytes
from train_fixtures import tiny_config

pytestmark = pytest.mark.slow  # many processes or subprocess CLIs: scripts/test.sh --fast leaves it out

LAYOUTS = {"tp4": {"tp": 4}, "fsdp4": {"tp": 1}, "2x2": {"dp_shard": 2, "tp": 2}}
SMALL = {
    "vocab_size": 128,
    "d_model": 32,
    "n_layers": 2,
    "n_heads": 4,
    "n_kv_heads": 4,
    "ffn_dim": 64,
    "max_seq_len": 64,
}
# memory runs: every weight its own mapping (>= 64 KiB), the model (84 MB in fp32) far above the noise
WIDE = {
    "vocab_size": 128,
    "d_model": 1024,
    "n_layers": 2,
    "n_heads": 8,
    "n_kv_heads": 8,
    "ffn_dim": 2048,
    "max_seq_len": 64,
}


def _config(parallel: dict, model: dict = SMALL, **over):
    from pretrain.config.loading import load_train_config

    return load_train_config(tiny_config("/unused", "/unused", model=model, parallel=parallel, device="cpu", **over))


def _torchrun(nproc: int, root, mode: str, timeout: int = 400) -> list[dict]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MALLOC_MMAP_THRESHOLD_": "65536"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={nproc}",
        os.path.abspath(__file__),
        mode,
        str(root),
    ]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:  # a rank waiting in a collective the others left
        pytest.fail(f"torchrun {mode} hung: {str(exc.stderr)[-3000:]}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return [json.loads((root / f"{mode}-{rank}.json").read_text()) for rank in range(nproc)]


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    return _torchrun(4, tmp_path_factory.mktemp("layouts"), "layouts")


@pytest.fixture(scope="module")
def fsdp2(tmp_path_factory):
    return _torchrun(2, tmp_path_factory.mktemp("fsdp2"), "fsdp2")


# --- memory ---------------------------------------------------------------------------------------------


def test_accumulation_keeps_only_gradient_shards_by_default(fsdp2):
    """Between micro-batches each of 2 FSDP ranks holds half the fp32 gradients by default; no-sync holds
    them all, unsharded (what the planner counts for it); both end with the same gradients."""
    for rank in fsdp2:
        assert rank["grads_held"]["default"] < 0.65, rank
        assert rank["grads_held"]["no_sync"] > 0.9, rank
        assert rank["same_gradients"]


def test_initialisation_never_holds_the_full_model(fsdp2):
    """Rank 0 grows by about its shard (half the model) while initialising; before, it built the whole model."""
    init = fsdp2[0]["init_growth"]
    assert init < 0.8, init


def test_export_never_holds_the_full_model_twice(fsdp2):
    """Rank 0 grows by about one tensor while exporting; before, the export held a gathered copy plus its bytes."""
    export = fsdp2[0]["export_growth"]
    assert export < 0.4, export


def test_zero2_holds_every_block_gathered_from_forward_to_backward(fsdp2):
    """``reshard_after_forward: false`` on 2 FSDP ranks: at the loss each rank still holds every block's
    gathered fp32 weights, where ZeRO-3 holds only the last block's (kept for the backward that starts
    with it): the resident size at the loss differs by block 0's weights. The planner's ZeRO-2 counts
    the whole weights where its ZeRO-3 counts a shard: here (2 blocks, 2 ranks) the same bytes. (It
    does not model the last block ZeRO-3 keeps too, nor, in fp32, the shard FSDP keeps beside the
    gathered copy; under bf16 that shard is the fp32 master its optimizer count holds.)"""
    from pretrain.models.llama import block_params
    from pretrain.planning.plan_memory import layout_memory

    cfg = _config({"tp": 1}, model=WIDE).model
    kw = dict(gpus=2, seq_len=17, micro_batch=2, precision="fp32")
    zero2, zero3 = (layout_memory(cfg, level, 1, "none", **kw)["total"] for level in ("zero2", "zero3"))
    planned = zero2 - zero3
    for rank in fsdp2:
        assert rank["zero2_extra"] == pytest.approx(block_params(cfg) * 4, rel=0.1), rank["zero2_extra"]
        assert rank["zero2_extra"] == pytest.approx(planned, rel=0.1), (rank["zero2_extra"], planned)


def test_planner_counts_unsharded_gradients_of_no_sync_accumulation():
    """No-sync accumulation holds 4 bytes of gradient per parameter on every GPU: 13B fits 8 H100s with
    FSDP and a micro-batch of 1 by default, but needs TP or recomputation with no-sync."""
    from pretrain.models.llama import num_params
    from pretrain.planning.hardware import get_gpu
    from pretrain.planning.plan import plan
    from pretrain.planning.plan_memory import layout_memory
    from pretrain.planning.sizing import size_model

    cfg, h100 = size_model(13e9), get_gpu("h100")
    kw = dict(gpus=8, seq_len=2048, micro_batch=4)
    default = layout_memory(cfg, "zero3", 1, "selective", **kw, grad_accum=16)
    no_sync = layout_memory(cfg, "zero3", 1, "selective", **kw, grad_accum=16, no_sync=True)
    assert no_sync["grads"] - default["grads"] == pytest.approx(num_params(cfg) * (4 - 2 / 8))
    one = layout_memory(cfg, "zero3", 1, "selective", **kw, grad_accum=1)
    assert layout_memory(cfg, "zero3", 1, "selective", **kw, grad_accum=1, no_sync=True) == one  # nothing deferred
    assert default["total"] <= h100.memory_bytes < no_sync["total"]
    first = plan(cfg, gpus=8, gpu=h100)["layout"]
    assert (first["tp"], first["checkpointing"]) == (1, "none")
    chosen = plan(cfg, gpus=8, gpu=h100, no_sync=True)["layout"]  # a leaner layout: TP or recomputation
    assert (chosen["tp"], chosen["checkpointing"]) != (1, "none") and chosen["no_sync_accumulation"]


# --- mixed precision --------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_fp16_overflow_on_one_rank_skips_the_step_everywhere(layouts, layout):
    """An inf in one rank's gradient shard: every rank skips the update and halves the loss scale."""
    seen = [rank["fp16_inf"][layout] for rank in layouts]
    assert all(s["params_unchanged"] for s in seen), seen
    assert {s["scale"] for s in seen} == {seen[0]["initial_scale"] / 2}, seen


@pytest.mark.parametrize("layout", ["fsdp4", "2x2"])
def test_bf16_fsdp_policy_runs_on_cpu_with_fp32_rotary_tables(layouts, layout):
    """FSDP gathers bf16 weights (its MixedPrecisionPolicy, on CPU too), the rotary tables reach every block
    in fp32, and the loss stays close to fp32's."""
    seen = layouts[0]["bf16"][layout]
    assert seen["weight_dtype"] == "torch.bfloat16" and seen["rope_dtype"] == "torch.float32", seen
    assert seen["loss"] == pytest.approx(seen["fp32_loss"], rel=2e-2)


# --- initialisation ---------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_sharded_initialisation_equals_the_single_process_weights(layouts, layout):
    assert layouts[0]["init_max_diff"][layout] == 0.0


# --- selective activation checkpointing ----------------------------------------------------------------


def _backward_ops(model, tokens) -> dict[str, int]:
    """How often each op runs in the backward pass (recomputation included)."""
    from collections import Counter

    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops[str(func)] += 1
            return func(*args, **(kwargs or {}))

    loss = model(tokens).float().logsumexp(-1).mean()
    counter = Count()
    with counter:
        loss.backward()
    return dict(counter.ops)


def _recomputed(modes: dict[str, dict[str, int]]) -> dict[str, int]:
    """Ops run more often in the selective backward than without checkpointing: the recomputed ones."""
    return {op: n - modes["none"].get(op, 0) for op, n in modes["selective"].items() if n > modes["none"].get(op, 0)}


def test_selective_checkpointing_recomputes_no_matmul_and_no_attention(one_torch_thread):
    from pretrain.distributed.activation_checkpoint import apply_activation_checkpointing
    from pretrain.models.llama import Llama

    cfg = _config({}, model=SMALL | {"n_kv_heads": 2}).model
    modes = {}
    for mode in ("none", "selective"):
        model = Llama(cfg)
        model.init_weights(0)
        apply_activation_checkpointing(model, mode)
        modes[mode] = _backward_ops(model, torch.randint(0, 128, (2, 16)))
    again = _recomputed(modes)
    assert again, "selective checkpointing recomputed nothing"  # the norms and SwiGLU's silu are recomputed
    assert not [op for op in again if "mm" in op or "attention" in op], again


def test_selective_checkpointing_keeps_the_tp_reduce_scatter(layouts):
    again = layouts[0]["selective_tp_recomputed"]
    assert again and not [op for op in again if "reduce_scatter" in op or "mm" in op], again


def test_gqa_saves_kv_heads_once(one_torch_thread):
    """SDPA's enable_gqa: the activations kept for attention hold each kv head once, not once per q head."""
    from pretrain.models.llama import Llama

    def saved(kv_heads: int) -> int:
        model = Llama(_config({}, model=SMALL | {"n_kv_heads": kv_heads}).model)
        model.init_weights(0)
        skip = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
        seen = {}

        def pack(t):
            if t.untyped_storage().data_ptr() not in skip:
                seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            model(torch.randint(0, 128, (2, 16)))
        return sum(seen.values())

    # 4 -> 1 kv heads drops k and v to a quarter: 2 * 3/4 * d elements per token per layer
    assert saved(4) - saved(1) == pytest.approx(2 * 2 * 16 * 2 * (32 * 3 // 4) * 4, rel=0.01)


# --- compile ---------------------------------------------------------------------------------------------


def test_fsdp_with_compiled_blocks_trains_like_eager(fsdp2):
    """Compiled blocks (inductor) under FSDP with selective checkpointing: the same losses over two steps
    as eager (tensor parallelism with compile is refused when the config loads, see below)."""
    for rank in fsdp2:
        assert rank["compiled_losses"] == pytest.approx(rank["eager_losses"], rel=1e-5)


# --- configs the mesh cannot run ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "over, message",
    [
        ({"seq_len": 18, "parallel": {"tp": 4}}, "seq_len 18 must be divisible by parallel.tp=4"),
        ({"parallel": {"tp": 8}}, "must divide model.n_heads=4"),
        ({"model": SMALL | {"n_kv_heads": 2}, "parallel": {"tp": 4}}, "must divide model.n_kv_heads=2"),
        (
            {"global_batch_size": 12, "micro_batch_size": 2, "parallel": {"dp_shard": 4}},
            "multiple of micro_batch_size 2 x",
        ),
        ({"parallel": {"compile": True, "tp": 2}}, "compile is not supported with tensor parallelism"),
        ({"parallel": {"loss_parallel": True}}, "loss_parallel needs tp > 1"),
    ],
)
def test_configs_the_mesh_cannot_run_fail_when_loaded(over, message):
    from dataprep.core.validation import ConfigError
    from pretrain.config.loading import load_train_config

    cfg = tiny_config("/unused", "/unused", model=over.pop("model", SMALL), **over)
    with pytest.raises(ConfigError, match=message):
        load_train_config(cfg)


# --- the workers -------------------------------------------------------------------------------------


class _MeasuredBatches(list):
    """Micro-batches that record the resident size whenever the next one is asked for (after the
    previous backward pass)."""

    def __iter__(self):
        self.rss = []
        for item in super().__iter__():
            self.rss.append(status_bytes("VmRSS"))
            yield item


def _build(parallel: dict, model: dict = SMALL, precision: str = "fp32", **over):
    from pretrain.components.optimizer import build_optimizer
    from pretrain.distributed.parallel_dims import ParallelDims
    from pretrain.train_setup import build_parallel_model
    from pretrain.train_step import TrainStepContext

    cfg = _config(parallel, model=model, precision=precision, **over)
    dims = ParallelDims.from_config(cfg.parallel, torch.distributed.get_world_size())
    dims.build_mesh("cpu")
    model = build_parallel_model(cfg, dims, torch.device("cpu"), precision)
    ctx = TrainStepContext(
        torch.device("cpu"), precision, cfg.parallel.loss_parallel, dims.fsdp_enabled, cfg.parallel.no_sync_accumulation
    )
    return cfg, dims, model, build_optimizer(model, cfg.optim, precision), ctx


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


def _batches(n: int, seq: int = 17) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return [torch.randint(0, 128, (2, seq), generator=gen) for _ in range(n)]


def _held_at_the_loss(reshard_after_forward: bool) -> int:
    """How far the resident size rises from before a forward pass (shards only) to its loss, on WIDE."""
    _, _, model, _, _ = _build({"tp": 1, "reshard_after_forward": reshard_after_forward}, model=WIDE)
    tokens = _batches(1)[0]
    model(tokens).float().logsumexp(-1).mean().backward()  # the first pass allocates once-only state
    before = status_bytes("VmRSS")
    loss = model(tokens).float().logsumexp(-1).mean()
    held = status_bytes("VmRSS") - before
    loss.backward()
    return held


def _fsdp2_worker() -> dict:
    import tempfile

    from pretrain.components.safetensors_export import export_model
    from pretrain.models.llama import num_params
    from pretrain.train_step import TrainStepContext, accumulate_gradients, train_step

    out: dict = {"grads_held": {}}
    _build({"tp": 1}, model=WIDE)  # first use loads code (resident too): measure the second build
    (cfg, _, model, optimizer, ctx), init = peak_growth(lambda: _build({"tp": 1}, model=WIDE))
    full = num_params(cfg.model) * 4
    out["init_growth"] = init / full
    grads = {}
    for mode in ("warm-up", "default", "no_sync"):
        ctx = TrainStepContext(torch.device("cpu"), "fp32", False, fsdp=True, no_sync_accumulation=mode == "no_sync")
        optimizer.zero_grad(set_to_none=True)
        batches = _MeasuredBatches(_batches(2))
        before = status_bytes("VmRSS")
        accumulate_gradients(model, batches, ctx)
        out["grads_held"][mode] = (batches.rss[1] - before) / full
        grads[mode] = [_local(p.grad).clone() for p in model.parameters()]
    out["same_gradients"] = all(
        torch.allclose(a, b, rtol=1e-5, atol=1e-7) for a, b in zip(grads["default"], grads["no_sync"])
    )
    optimizer.zero_grad(set_to_none=True)
    del grads, optimizer
    path = os.path.join(tempfile.mkdtemp(), "model.safetensors")
    _, export = peak_growth(lambda: export_model(model, path))
    out["export_growth"] = export / full
    del model
    out["zero2_extra"] = _held_at_the_loss(False) - _held_at_the_loss(True)
    for compile_ in (False, True):
        cfg, _, model, optimizer, ctx = _build({"tp": 1, "compile": compile_, "activation_checkpointing": "selective"})
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
        losses = [train_step(model, optimizer, scheduler, _batches(2), ctx, 1.0)[0].item() for _ in range(2)]
        out["compiled_losses" if compile_ else "eager_losses"] = losses
    return out


def _layouts_worker() -> dict:
    from torch.distributed.tensor import DTensor

    from pretrain.models.llama import Llama
    from pretrain.train_step import accumulate_gradients, optimizer_step

    rank = torch.distributed.get_rank()
    reference = Llama(_config({}).model)
    reference.init_weights(_config({}).seed)
    reference = reference.state_dict()
    out: dict = {"fp16_inf": {}, "init_max_diff": {}, "bf16": {}}
    for name, parallel in LAYOUTS.items():
        cfg, dims, model, optimizer, ctx = _build(parallel)
        state = {k: v.full_tensor() if isinstance(v, DTensor) else v for k, v in model.state_dict().items()}
        out["init_max_diff"][name] = max((state[k] - reference[k]).abs().max().item() for k in reference)

        cfg, dims, model, optimizer, ctx = _build(parallel, precision="fp16")
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
        accumulate_gradients(model, _batches(1), ctx)
        if rank == 1:  # an overflow in one rank's shard of the first gradient
            _local(next(model.parameters()).grad).view(-1)[0] = float("inf")
        before = [_local(p).clone() for p in model.parameters()]
        initial = ctx.scaler.get_scale()
        optimizer_step(optimizer, scheduler, ctx, grad_clip=1.0)
        out["fp16_inf"][name] = {
            "params_unchanged": all(torch.equal(a, _local(p)) for a, p in zip(before, model.parameters())),
            "scale": ctx.scaler.get_scale(),
            "initial_scale": initial,
        }
    for name in ("fsdp4", "2x2"):
        losses, seen = {}, {}
        for precision in ("fp32", "bf16"):
            cfg, dims, model, optimizer, ctx = _build(LAYOUTS[name], precision=precision)

            def look(module, args):
                seen.update(weight_dtype=str(module.wq.weight.dtype), rope_dtype=str(args[1][0].dtype))

            model.layers["1"].attention.register_forward_pre_hook(look)
            losses[precision] = accumulate_gradients(model, _batches(1), ctx).item()
        out["bf16"][name] = {**seen, "loss": losses["bf16"], "fp32_loss": losses["fp32"]}
    modes = {}
    for mode in ("none", "selective"):
        cfg, dims, model, optimizer, ctx = _build(LAYOUTS["tp4"] | {"activation_checkpointing": mode})
        modes[mode] = _backward_ops(model, _batches(1, seq=16)[0])
    out["selective_tp_recomputed"] = _recomputed(modes)
    return out


if __name__ == "__main__":
    _mode, _root = sys.argv[1], sys.argv[2]
    torch.distributed.init_process_group("gloo")
    torch.manual_seed(0)
    _result = {"fsdp2": _fsdp2_worker, "layouts": _layouts_worker}[_mode]()
    with open(os.path.join(_root, f"{_mode}-{torch.distributed.get_rank()}.json"), "w") as _fh:
        json.dump(_result, _fh)
    torch.distributed.destroy_process_group()
