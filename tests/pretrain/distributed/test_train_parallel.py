"""Parallel training equals single-process training: 4 gloo processes on CPU under torchrun.

Two launches: the real command (``torchrun -m pretrain.train`` with FSDP2 x TP = 2 x 2), and this file
as a torchrun worker (``__main__`` below) that runs, in one process group, TP-only with loss parallel,
FSDP-only, and an FSDP run stopped at step 3 then resumed at another data-parallel size (2 x 2).
Each must reproduce the single-process losses within 1e-5 relative over 6 steps.
"""

from __future__ import annotations

import json
import os
import sys

import pytest
import torch
import yaml

from parallel_runs import STEPS, config, metric_records, run_single_process, torchrun
from train_fixtures import make_token_dataset

pytestmark = pytest.mark.slow  # many processes or subprocess CLIs: scripts/test.sh --fast leaves it out

WORKER_RUNS = {  # name -> parallel config (with torchrun, 4 processes)
    "tp4": {"tp": 4, "loss_parallel": True},
    "fsdp4": {"tp": 1},
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Single-process reference, then the two torchrun launches; returns the run directories."""
    root = tmp_path_factory.mktemp("parallel")
    data = make_token_dataset(root / "tokens", n_docs=200)
    run_single_process(config(data, root / "single"))
    cfg_path = root / "2x2.yaml"
    cfg_path.write_text(yaml.safe_dump(config(data, root / "2x2", {"dp_shard": 2, "tp": 2})))
    torchrun(["-m", "pretrain.train", str(cfg_path)])
    torchrun([os.path.abspath(__file__), str(root), data])
    return root


def _assert_same_losses(root, name: str) -> None:
    for kind in ("train", "val"):
        ref, got = metric_records(root / "single", kind), metric_records(root / name, kind)
        assert sorted(got) == sorted(ref) and len(ref) >= (STEPS if kind == "train" else 2)
        for step in ref:
            assert got[step] == pytest.approx(ref[step], rel=1e-5), (name, kind, step)


def test_fsdp_x_tp_2x2_matches_single_process(runs):
    _assert_same_losses(runs, "2x2")


def test_tp_only_with_loss_parallel_matches_single_process(runs):
    _assert_same_losses(runs, "tp4")


def test_fsdp_only_matches_single_process(runs):
    _assert_same_losses(runs, "fsdp4")


def test_resume_at_another_dp_size_continues_the_same_run(runs):
    state = json.loads((runs / "resized" / "checkpoints" / "step-00000003" / "train_state.json").read_text())
    assert state["parallel"] == {"pp": 1, "dp_replicate": 1, "dp_shard": 4, "cp": 1, "tp": 1}
    assert state["loader"] == {"samples_consumed": 24}
    state = json.loads((runs / "resized" / "checkpoints" / "step-00000006" / "train_state.json").read_text())
    assert state["parallel"] == {"pp": 1, "dp_replicate": 1, "dp_shard": 2, "cp": 1, "tp": 2}
    _assert_same_losses(runs, "resized")


def test_parallel_export_equals_single_process_export(runs):
    from safetensors.torch import load_file

    ref = load_file(runs / "single" / "model.safetensors")
    for name in ("2x2", "tp4", "fsdp4", "resized"):
        got = load_file(runs / name / "model.safetensors")
        assert set(got) == set(ref)
        for key in ref:
            torch.testing.assert_close(got[key], ref[key], rtol=1e-3, atol=1e-5)  # Adam amplifies rounding


def _worker(root: str, data: str) -> None:
    """Runs under torchrun: several layouts in one process group (saves process start-up time)."""
    from pretrain.config.loading import load_train_config
    from pretrain.train import run

    for name, parallel in WORKER_RUNS.items():
        run(load_train_config(config(data, os.path.join(root, name), parallel)))
    resized = os.path.join(root, "resized")
    run(load_train_config(config(data, resized, {"tp": 1})), stop_at=3)  # dp 4
    run(load_train_config(config(data, resized, {"dp_shard": 2, "tp": 2})), resume="auto")  # dp 2
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    _worker(sys.argv[1], sys.argv[2])
