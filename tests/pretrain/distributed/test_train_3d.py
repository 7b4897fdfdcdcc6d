"""Pipeline, context and replicated data parallelism train exactly like one process: 4 gloo processes on
CPU under one torchrun launch (this file is the worker, ``__main__`` below), every layout one ``run`` in
the same process group.

Layouts (4 ranks): pp 2 x dp_shard 2 (1F1B), pp 2 x tp 2, pp 4 interleaved 1F1B (2 stages per rank),
cp 2 x dp_shard 2, dp_replicate 2 x dp_shard 2 (HSDP), FSDP over 4 keeping the gathered weights from
forward to backward (ZeRO-2-like), the same over DDP (where it changes nothing); a pp run stopped at step 3
and resumed at the same layout, and one resumed at pp 4 (GPipe); and the other schedules (GPipe,
interleaved zero bubble; interleaved 1F1B with FSDP) for a few steps. Each must reproduce the
single-process losses within 1e-5 relative.
"""

from __future__ import annotations

import json
import os
import sys

import pytest
import torch

from parallel_runs import metric_records, run_single_process, torchrun
from train_fixtures import make_token_dataset, tiny_config

pytestmark = pytest.mark.slow  # many processes or subprocess CLIs: scripts/test.sh --fast leaves it out

STEPS, SHORT = 6, 2
MODEL = {
    "vocab_size": 128,
    "d_model": 32,
    "n_layers": 8,
    "n_heads": 4,
    "n_kv_heads": 2,
    "ffn_dim": 64,
    "max_seq_len": 64,
}
RUNS = {  # name -> parallel config, 4 processes
    "pp2_dp2": {"pp": 2, "dp_shard": 2},
    "pp2_tp2": {"pp": 2, "tp": 2},
    "pp4_interleaved": {"pp": 4, "pp_schedule": "interleaved_1f1b", "pp_stages_per_rank": 2},
    "cp2_dp2": {"cp": 2, "dp_shard": 2},
    "hsdp2x2": {"dp_replicate": 2, "dp_shard": 2},
    "fsdp4_zero2": {"dp_shard": 4, "reshard_after_forward": False},
    "ddp4_zero2": {"dp_replicate": 4, "dp_shard": 1, "reshard_after_forward": False},
}
SCHEDULES = {  # short runs of the other schedules
    "gpipe": {"pp": 4, "pp_schedule": "gpipe"},
    "interleaved_zero_bubble": {"pp": 4, "pp_schedule": "interleaved_zero_bubble", "pp_stages_per_rank": 2},
    "interleaved_fsdp": {"pp": 2, "pp_schedule": "interleaved_1f1b", "pp_stages_per_rank": 2, "dp_shard": 2},
}
RESUMES = {  # name -> (layout up to step 3, layout after)
    "pp_resumed": ({"pp": 2, "dp_shard": 2}, {"pp": 2, "dp_shard": 2}),
    "pp_resized": ({"pp": 2, "dp_shard": 2}, {"pp": 4, "pp_schedule": "gpipe"}),
}


def config(data, out, parallel: dict | None = None, steps: int = STEPS) -> dict:
    return tiny_config(
        data,
        out,
        model=MODEL,
        max_steps=steps,
        parallel=parallel or {},
        log={"every_steps": 1, "val_every_steps": 3, "val_batches": 1},
        checkpoint={"every_steps": 3, "keep_last": 2},
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("3d")
    data = make_token_dataset(root / "tokens", n_docs=200)
    run_single_process(config(data, root / "single"))
    torchrun([os.path.abspath(__file__), str(root), data], timeout=600)
    return root


def _assert_same_losses(root, name: str, steps: int = STEPS) -> None:
    for kind in ("train", "val") if steps == STEPS else ("train",):
        ref, got = metric_records(root / "single", kind), metric_records(root / name, kind)
        ref = {step: loss for step, loss in ref.items() if step <= steps}
        assert sorted(got) == sorted(ref) and ref, (name, kind)
        for step in ref:
            assert got[step] == pytest.approx(ref[step], rel=1e-5), (name, kind, step)


@pytest.mark.parametrize("name", list(RUNS))
def test_layout_matches_single_process(runs, name):
    _assert_same_losses(runs, name)


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_each_schedule_matches_the_reference_losses(runs, name):
    _assert_same_losses(runs, name, SHORT)


@pytest.mark.parametrize("name", list(RESUMES))
def test_pipeline_resumes_exactly(runs, name):
    before, after = RESUMES[name]
    ckpts = runs / name / "checkpoints"
    assert json.loads((ckpts / "step-00000003" / "train_state.json").read_text())["parallel"]["pp"] == before["pp"]
    assert json.loads((ckpts / "step-00000006" / "train_state.json").read_text())["parallel"]["pp"] == after["pp"]
    _assert_same_losses(runs, name)


def test_bubble_fraction_is_logged(runs):
    rec = next(json.loads(line) for line in (runs / "pp4_interleaved" / "metrics.jsonl").read_text().splitlines())
    # 4 micro-batches (8 sequences of 2), p = 4, v = 2: (p-1)/(m+p-1)/v
    assert rec["pp_bubble"] == pytest.approx(3 / 7 / 2)
    assert "pp_bubble" not in json.loads((runs / "single" / "metrics.jsonl").read_text().splitlines()[0])


@pytest.mark.parametrize("name", ["pp2_dp2", "pp4_interleaved", "cp2_dp2", "hsdp2x2", "fsdp4_zero2", "pp_resized"])
def test_export_equals_single_process_export(runs, name):
    from safetensors.torch import load_file

    ref, got = load_file(runs / "single" / "model.safetensors"), load_file(runs / name / "model.safetensors")
    assert set(got) == set(ref)
    for key in ref:
        torch.testing.assert_close(got[key], ref[key], rtol=1e-3, atol=1e-5)  # Adam amplifies rounding


def test_planner_zero2_holds_the_gathered_weights_of_the_fsdp4_zero2_run():
    """The planner's ZeRO-2 for the fsdp4_zero2 run (4 ranks, fp32): every rank holds the whole weights
    from forward to backward, where ZeRO-3 holds a quarter; gradients, Adam states, activations and
    FSDP's buffers are the same. (The measured counterpart is in tests/pretrain/distributed/test_train_scale.py.)"""
    from pretrain.config.model import ModelConfig
    from pretrain.models.llama import num_params
    from pretrain.planning.plan_memory import layout_memory

    cfg = ModelConfig(**MODEL)
    kw = dict(gpus=4, seq_len=16, micro_batch=2, precision="fp32")
    zero2, zero3 = (layout_memory(cfg, level, 1, "none", **kw) for level in ("zero2", "zero3"))
    assert zero2["params"] == num_params(cfg) * 4 and zero3["params"] == num_params(cfg) * 4 / 4
    assert {k: v for k, v in zero2.items() if k not in ("params", "total")} == {
        k: v for k, v in zero3.items() if k not in ("params", "total")
    }


def test_stages_split_blocks_by_flops():
    from pretrain.config.model import ModelConfig
    from pretrain.distributed.pipeline_parallel import split_layers, stage_indices

    cfg = ModelConfig(**MODEL)
    assert split_layers(cfg, 8) == [range(i, i + 1) for i in range(8)]
    # the head (d x vocab = 4096) costs less than a block (~10k): 4 + 4, not 5 + 3
    assert split_layers(cfg, 2) == [range(0, 4), range(4, 8)]
    big_head = cfg.model_copy(update={"vocab_size": 1024})  # head 32k = 3 blocks: the last stage gets fewer
    assert split_layers(big_head, 2) == [range(0, 6), range(6, 8)]
    assert stage_indices(1, 4, 2) == [1, 5]


@pytest.mark.parametrize(
    "parallel, message",
    [
        ({"pp": 2, "pp_schedule": "interleaved_1f1b"}, "needs pp_stages_per_rank >= 2"),
        ({"pp": 2, "pp_stages_per_rank": 2}, "runs one stage per rank"),
        ({"pp": 16}, "cannot fill 16 pipeline stages"),
        ({"pp": 2, "no_sync_accumulation": True}, "no_sync_accumulation does not apply"),
        (
            {"pp": 2, "pp_schedule": "interleaved_zero_bubble", "pp_stages_per_rank": 2, "dp_shard": 2},
            "does not compose with FSDP",
        ),
        ({"cp": 2, "pp": 2}, "cp > 1 does not combine"),
        ({"cp": 3}, "divisible by parallel.tp=1 x cp=3"),
        ({"cp": 16}, "divisible by 2 x parallel.cp=16"),
        ({"pp": 4, "dp_shard": 2}, "2 micro-batches per step cannot fill 4 pipeline ranks"),
    ],
)
def test_layouts_that_cannot_run_fail_when_loaded(parallel, message):
    from dataprep.core.validation import ConfigError
    from pretrain.config.loading import load_train_config

    with pytest.raises(ConfigError, match=message):
        load_train_config(config("/unused", "/unused", parallel))


def test_offload_is_a_gpu_option():
    """The config path of CPU offload: it loads, and a run on CPU is refused with the reason."""
    from pretrain.config.loading import load_train_config
    from pretrain.distributed.parallel_dims import ParallelDims
    from pretrain.train_setup import build_parallel_model

    cfg = load_train_config(config("/unused", "/unused", {"offload": True, "dp_shard": 2}))
    assert cfg.parallel.offload
    with pytest.raises(ValueError, match="offload .* needs CUDA"):
        build_parallel_model(cfg, ParallelDims.from_config(cfg.parallel, 2), torch.device("cpu"), "fp32")


def _worker(root: str, data: str) -> None:
    from pretrain.config.loading import load_train_config
    from pretrain.train import run

    for name, parallel in RUNS.items():
        run(load_train_config(config(data, os.path.join(root, name), parallel)))
    for name, parallel in SCHEDULES.items():
        run(load_train_config(config(data, os.path.join(root, name), parallel, steps=SHORT)))
    for name, (before, after) in RESUMES.items():
        out = os.path.join(root, name)
        run(load_train_config(config(data, out, before)), stop_at=3)
        run(load_train_config(config(data, out, after)), resume="auto")
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    _worker(sys.argv[1], sys.argv[2])
