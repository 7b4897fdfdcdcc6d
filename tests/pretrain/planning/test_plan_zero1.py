"""ZeRO-1 in the planner: counted as the trainer runs it (fp32 weights and gradients whole, AdamW's moments
sharded), chosen where DDP does not fit and it is the fastest that does, and written by ``--output`` as
``parallel.shard_optimizer``."""

from __future__ import annotations

import json

import pytest

from pretrain.cli import main as cli
from pretrain.config.loading import load_train_config
from pretrain.models.llama import num_params
from pretrain.planning.plan import plan
from pretrain.planning.plan_inputs import plan_gpu, plan_model
from pretrain.planning.plan_layouts import RUNNABLE_ZERO_LEVELS


@pytest.fixture(scope="module")
def zero1_plan() -> dict:
    """A 3B model on 8 GPUs of 60 GB: DDP does not fit."""
    return plan(plan_model("3B"), gpus=8, gpu=plan_gpu("h100", "bf16", memory_gb=60))


def test_zero1_is_chosen_where_ddp_does_not_fit(zero1_plan):
    lay = zero1_plan["layout"]
    assert lay["zero_level"] == "zero1" and lay["shard_optimizer"] and lay["dp_replicate"] == 8
    assert "zero1" in RUNNABLE_ZERO_LEVELS and "zero1" in zero1_plan["breakdown"]["1"]
    assert any(d.startswith("DDP x8") and ">" in d for d in zero1_plan["decisions"])  # DDP did not fit


def test_zero1_counts_its_sharded_adam_states(zero1_plan):
    lay, n = zero1_plan["layout"], num_params(plan_model("3B"))
    assert lay["memory"]["optimizer"] == pytest.approx(8 * n / 8, rel=0.01)  # two fp32 moments, 8 ways
    assert lay["memory"]["params"] == pytest.approx(4 * n, rel=0.01) and lay["memory"]["fsdp_buffers"] == 0


def test_zero1_plan_output_is_a_runnable_zero1_config(tmp_path, capsys):
    out = tmp_path / "train.yaml"
    (tmp_path / "tok").mkdir()  # shards to come: plan refuses a folder that does not exist
    assert (
        cli(
            [
                "plan",
                "3B",
                "--gpus",
                "8",
                "--gpu-memory-gb",
                "60",
                "--output",
                str(out),
                "--data",
                str(tmp_path / "tok"),
                "--json",
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["layout"]["zero_level"] == "zero1"
    par = load_train_config(str(out)).parallel
    assert par.shard_optimizer and par.dp_replicate == 8 and par.dp_shard == 1
