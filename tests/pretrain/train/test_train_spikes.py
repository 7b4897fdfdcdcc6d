"""Loss spikes: the detector's statistic (median + k x MAD of a window), the injected spike
(``--inject spike:step=S,scale=X``), the policies log, skip and rollback (reload the last checkpoint before
the spike, skip N batches of the data order), and the retention that keeps that checkpoint. One process
first, then 2 gloo ranks under torchrun where the spike is on one rank only and saves are asynchronous."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
import torch
import yaml

from pretrain.cli import main as pretrain_main
from pretrain.components.faults import Fault, parse_fault
from pretrain.components.metrics import read_metrics
from pretrain.components.spikes import SpikeDetector
from pretrain.config.loading import load_train_config
from pretrain.inference.plot import training_section
from pretrain.train import Trainer, run
from train_fixtures import make_token_dataset, tiny_config

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]

SPIKE_STEP, SKIP = 5, 3  # checkpoints every 2 steps: the last one before the spike is step 4


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_token_dataset(tmp_path_factory.mktemp("tokens"), n_docs=200)


def _config(data, out, policy: str, **overrides) -> dict:
    return tiny_config(
        data,
        out,
        max_steps=8,
        checkpoint={"every_steps": 2, "keep_last": 1},
        spikes={"window": 3, "policy": policy, "skip_batches": SKIP},
        log={"every_steps": 1, "val_every_steps": 100, "val_batches": 1},
        **overrides,
    )


def _records(out_dir, kind: str) -> list[dict]:
    return [r for r in read_metrics(os.path.join(out_dir, "metrics.jsonl")) if r["kind"] == kind]


def _checkpoints(out_dir) -> list[str]:
    return sorted(n for n in os.listdir(os.path.join(out_dir, "checkpoints")) if n.startswith("step-"))


def _samples_consumed(out_dir, name: str) -> int:
    with open(os.path.join(out_dir, "checkpoints", name, "train_state.json"), encoding="utf-8") as fh:
        return json.load(fh)["loader"]["samples_consumed"]


# -- the parts ---------------------------------------------------------------------------------------


def test_a_spike_is_a_loss_far_above_the_window_median():
    detector = SpikeDetector(window=4, threshold=6)
    losses = [5.0, 4.9, 4.95, 4.85]  # median 4.925, MAD 0.05 -> limit 4.925 + 6 x 1.4826 x 0.05
    assert [detector.observe(step, loss) for step, loss in enumerate(losses, 1)] == [None] * 4  # filling the window
    assert detector.observe(5, 5.3) is None  # within the noise
    assert detector.observe(6, float("nan")) is None and len(detector.history) == 4  # the guard's, not counted
    spike = detector.observe(7, 9.0, rank=1)
    assert (spike.step, spike.rank, spike.median) == (7, 1, pytest.approx(4.925))
    assert spike.limit == pytest.approx(4.925 + 6 * 1.4826 * 0.05)
    restored = SpikeDetector(window=4, threshold=6)
    restored.load_state_dict(json.loads(json.dumps(detector.state_dict())))
    assert restored.history == detector.history
    flat = SpikeDetector(window=3, threshold=6)  # MAD zero: the floor keeps noise from counting
    assert [flat.observe(s, 2.0) for s in (1, 2, 3)] + [flat.observe(4, 2.01)] == [None] * 4
    assert flat.observe(5, 2.5) is not None


def test_spike_faults_parse_with_a_scale():
    assert parse_fault("spike:step=5,rank=1,scale=50") == Fault("spike", 5, 1, 50)
    assert parse_fault("spike:step=5").scale == 100
    with pytest.raises(ValueError, match="'seconds=3' is not one of"):
        parse_fault("spike:step=5,seconds=3")


# -- one process ---------------------------------------------------------------------------------------


def test_the_log_policy_records_a_spike_with_the_checkpoint_before_it(data, tmp_path, capsys):
    cfg = tmp_path / "train.yaml"
    cfg.write_text(yaml.safe_dump(_config(data, tmp_path / "run", "log")))
    assert pretrain_main(["train", str(cfg), "--inject", f"spike:step={SPIKE_STEP},scale=50"]) == 0
    [spike] = _records(tmp_path / "run", "spike")
    assert (spike["step"], spike["rank"], spike["policy"]) == (SPIKE_STEP, 0, "log")
    assert spike["loss"] > 20 * spike["median"] and spike["checkpoint_before"].endswith("step-00000004")
    assert _records(tmp_path / "run", "rollback") == []
    train = _records(tmp_path / "run", "train")
    assert train[SPIKE_STEP - 1]["loss"] == spike["loss"] and math.isfinite(train[-1]["loss"])
    # keep_last 1, and the last checkpoint before the spike, pinned with its reason
    assert _checkpoints(tmp_path / "run") == ["step-00000004", "step-00000008"]
    assert "loss spike at step 5" in (tmp_path / "run" / "checkpoints" / "step-00000004" / "pinned.json").read_text()
    # the spike in the run's plot and report
    capsys.readouterr()
    assert pretrain_main(["plot", str(tmp_path / "run"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["events"] == {"spike": 1}
    section = training_section(str(tmp_path / "run"), str(tmp_path))
    assert ["events", "1 loss spike (step 5)"] in section.tables[0][1]


def test_policy_skip_holds_the_update_back(data, tmp_path):
    trainer = Trainer(load_train_config(_config(data, tmp_path, "skip")), (Fault("spike", SPIKE_STEP, 0, 50),))
    trainer.resume(None)
    trainer.start_logging()
    trainer.train(end=SPIKE_STEP - 1)
    weights = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.train(end=SPIKE_STEP)
    assert all(torch.equal(weights[k], v) for k, v in trainer.model.state_dict().items())
    assert all(int(v["step"]) == SPIKE_STEP - 1 for v in trainer.optimizer.state.values())
    trainer.train(end=8)
    trainer.finish()
    assert [(r["step"], r["policy"]) for r in _records(tmp_path, "spike")] == [(SPIKE_STEP, "skip")]


def test_rollback_equals_a_resume_from_before_the_spike_past_n_batches(data, tmp_path):
    out, ref = tmp_path / "run", tmp_path / "reference"
    cfg = _config(data, out, "rollback")
    run(load_train_config(cfg), inject=[f"spike:step={SPIKE_STEP},scale=50"])
    [rollback] = _records(out, "rollback")
    global_batch = cfg["global_batch_size"]
    assert (rollback["step"], rollback["to_step"], rollback["skipped_batches"]) == (SPIKE_STEP, 4, SKIP)
    assert rollback["samples_consumed"] == (4 + SKIP) * global_batch
    assert _checkpoints(out) == ["step-00000004", "step-00000008"]  # the rollback target outlives keep_last 1
    assert _samples_consumed(out, "step-00000008") == (8 + SKIP) * global_batch
    # the same as resuming from that checkpoint with the loader moved on by hand
    trainer = Trainer(load_train_config(_config(data, ref, "off")))
    trainer.resume(str(out / "checkpoints" / "step-00000004"))
    trainer.train_loader.skip(SKIP)
    trainer.start_logging()
    trainer.train(end=8)
    trainer.finish()
    rolled = [r["loss"] for r in _records(out, "train")]
    assert rolled[4:] == [r["loss"] for r in _records(ref, "train")] and all(map(math.isfinite, rolled))
    assert rolled[SPIKE_STEP - 1] < 10  # the spike's step again, on other data


def test_rollbacks_beyond_the_limit_stop_the_run(data, tmp_path, capsys):
    cfg = tmp_path / "train.yaml"
    config = _config(data, tmp_path / "run", "rollback")
    config["spikes"]["max_rollbacks"] = 0
    cfg.write_text(yaml.safe_dump(config))
    assert pretrain_main(["train", str(cfg), "--inject", f"spike:step={SPIKE_STEP}"]) == 3
    assert "step 5: a loss spike" in capsys.readouterr().err


# -- two processes -------------------------------------------------------------------------------------


def test_a_spike_on_one_of_two_ranks_rolls_every_rank_back_with_async_saves(data, tmp_path):
    single, fsdp = tmp_path / "single", tmp_path / "fsdp"
    run(load_train_config(_config(data, single, "rollback")), inject=[f"spike:step={SPIKE_STEP},scale=50"])
    cfg = tmp_path / "train.yaml"
    config = _config(data, fsdp, "rollback", parallel={"dp_shard": 2})
    config["checkpoint"]["async_save"] = True
    cfg.write_text(yaml.safe_dump(config))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node=2",
            "-m",
            "pretrain.train",
            str(cfg),
            "--inject",
            f"spike:step={SPIKE_STEP},rank=1,scale=100",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    [spike], [rollback] = _records(fsdp, "spike"), _records(fsdp, "rollback")
    assert (spike["step"], spike["rank"], rollback["to_step"]) == (SPIKE_STEP, 1, 4)
    assert rollback["samples_consumed"] == (4 + SKIP) * config["global_batch_size"]
    assert _checkpoints(fsdp) == ["step-00000004", "step-00000008"]
    assert not [n for n in os.listdir(fsdp / "checkpoints") if n.startswith(".tmp")]  # every save committed
    got, ref = ([r["loss"] for r in _records(out, "train")] for out in (fsdp, single))
    assert got == pytest.approx(ref, rel=1e-5)
