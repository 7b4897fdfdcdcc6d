"""Training without a babysitter: a non-finite loss or gradient norm skips the step on every rank
(counted, logged, AdamW untouched), too many in a row checkpoint and stop naming the step, and the
fault injector (``--inject nan:step=S,rank=R``) fires once per run folder. Single process first, then 2
gloo processes under torchrun, where a warm start (``init_from``) also begins as it does in one process."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
import torch
import yaml

from pretrain.cli import main as pretrain_main
from pretrain.components.faults import Fault, FaultInjector, parse_fault
from pretrain.components.guard import NonFinite, SkipCounter, find_non_finite
from pretrain.components.metrics import read_metrics
from pretrain.config.loading import load_train_config
from pretrain.train import Trainer, run
from train_fixtures import make_token_dataset, tiny_config

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_token_dataset(tmp_path_factory.mktemp("tokens"), n_docs=200)


def _records(out_dir, kind: str) -> list[dict]:
    return [r for r in read_metrics(os.path.join(out_dir, "metrics.jsonl")) if r["kind"] == kind]


# -- the parts ---------------------------------------------------------------------------------------


def test_fault_specs_parse_or_say_what_is_wrong():
    assert parse_fault("nan:step=12,rank=1") == Fault("nan", 12, 1)
    assert parse_fault("nan:step=3") == Fault("nan", 3, 0)
    for spec, message in [
        ("melt:step=3", "unknown fault 'melt'"),
        ("nan:rank=1", "step=N is required"),
        ("nan:step=x", "step must be an integer"),
        ("nan:step=3,when=4", "'when=4' is not one of"),
        ("nan:step=0", "step must be positive"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_fault(spec)


def test_an_injected_fault_fires_once_per_run_folder(tmp_path):
    faults = [Fault("nan", 2, 1)]
    assert FaultInjector(faults, str(tmp_path), rank=0, world=2).pending == []  # another rank's fault
    injector = FaultInjector(faults, str(tmp_path), rank=1, world=2)
    assert [injector.fire("nan", step) for step in (1, 2, 2)] == [False, True, False]
    assert os.listdir(tmp_path / "faults") == ["nan-step2-rank1.fired"]
    assert FaultInjector(faults, str(tmp_path), rank=1, world=2).pending == []  # a restarted process
    with pytest.raises(ValueError, match="no rank 1 among 1"):
        FaultInjector(faults, str(tmp_path), rank=0, world=1)


def test_the_guard_names_what_was_not_finite():
    one = torch.tensor(1.0)
    assert find_non_finite(one, one) is None
    assert find_non_finite(torch.tensor(math.nan), torch.tensor(math.inf)) == NonFinite((0,), (0,))
    assert find_non_finite(one, torch.tensor(math.inf)).cause == "grad_norm"
    assert find_non_finite(torch.tensor(math.nan), None).cause == "loss"  # fp16: the scaler judges gradients
    counter = SkipCounter(max_consecutive=1)
    found = NonFinite((1,), (0, 1))
    assert [counter.count(f) for f in (found, None, found)] == [True, False, True] and not counter.exhausted
    counter.count(found)
    assert counter.exhausted and (counter.total, counter.consecutive) == (3, 2)
    assert counter.record(7, found) | {"consecutive": 0} == {
        "kind": "skip",
        "step": 7,
        "rank": 1,
        "cause": "loss+grad_norm",
        "loss_ranks": [1],
        "grad_norm_ranks": [0, 1],
        "consecutive": 0,
        "skipped_total": 3,
    }
    assert "step 7: loss+grad_norm not finite (rank 1)" in str(counter.error(7, found))


# -- one process ---------------------------------------------------------------------------------------


def test_a_skipped_step_advances_only_the_schedule_and_the_data(data, tmp_path):
    trainer = Trainer(load_train_config(tiny_config(data, tmp_path)), (Fault("nan", 3),))
    trainer.resume(None)
    trainer.start_logging()
    trainer.train(end=2)
    weights = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    moments = {k: v["exp_avg"].clone() for k, v in trainer.optimizer.state.items()}
    loader_position = trainer.train_loader.state_dict()
    trainer.train(end=3)
    assert all(torch.equal(weights[k], v) for k, v in trainer.model.state_dict().items())
    assert all(torch.equal(moments[k], v["exp_avg"]) for k, v in trainer.optimizer.state.items())
    assert all(int(v["step"]) == 2 for v in trainer.optimizer.state.values())
    assert all(p.grad is None for p in trainer.model.parameters())
    assert trainer.scheduler.last_epoch == 3 and trainer.train_loader.state_dict() != loader_position
    records = trainer.train(end=6)
    trainer.finish()
    assert math.isfinite(records[-1]["loss"]) and all(int(v["step"]) == 5 for v in trainer.optimizer.state.values())
    skips = _records(tmp_path, "skip")
    assert [(r["step"], r["rank"], r["cause"]) for r in skips] == [(3, 0, "loss+grad_norm")]


def test_too_many_skips_in_a_row_stop_the_run_at_a_checkpoint_naming_the_step(data, tmp_path, capsys):
    cfg = tmp_path / "train.yaml"
    cfg.write_text(yaml.safe_dump(tiny_config(data, tmp_path / "run", max_consecutive_skips=1)))
    code = pretrain_main(["train", str(cfg), "--inject", "nan:step=2", "--inject", "nan:step=3"])
    assert code == 3
    err = capsys.readouterr().err
    assert "step 3: loss+grad_norm not finite (rank 0), 2 steps in a row" in err
    assert os.path.isdir(tmp_path / "run" / "checkpoints" / "step-00000003")
    assert [r["step"] for r in _records(tmp_path / "run", "skip")] == [2, 3]
    # the faults fired: resuming does not fire them again, and the run finishes
    assert (
        pretrain_main(["train", str(cfg), "--resume", "auto", "--inject", "nan:step=2", "--inject", "nan:step=3"]) == 0
    )
    assert math.isfinite(_records(tmp_path / "run", "train")[-1]["loss"])


# -- two processes -------------------------------------------------------------------------------------


def _torchrun(cfg_path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "-m",
        "pretrain.train",
        str(cfg_path),
        *args,
    ]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400)


def test_nan_on_one_of_two_ranks_skips_the_step_everywhere(data, tmp_path):
    out = tmp_path / "run"
    cfg = tmp_path / "train.yaml"
    cfg.write_text(yaml.safe_dump(tiny_config(data, out, parallel={"dp_shard": 2}, max_consecutive_skips=0)))
    proc = _torchrun(cfg, "--inject", "nan:step=3,rank=1")
    assert proc.returncode != 0, proc.stderr[-4000:]  # no skip allowed: stops at once, naming the step
    assert "step 3: loss+grad_norm not finite (rank 1)" in proc.stderr
    cfg.write_text(yaml.safe_dump(tiny_config(data, out, parallel={"dp_shard": 2}, max_consecutive_skips=1)))
    proc = _torchrun(cfg, "--resume", "auto", "--inject", "nan:step=4,rank=1", "--inject", "nan:step=3,rank=1")
    assert proc.returncode == 0, proc.stderr[-4000:]
    skips = _records(out, "skip")
    assert [(r["step"], r["rank"], r["cause"], r["grad_norm_ranks"]) for r in skips] == [
        (3, 1, "loss+grad_norm", [0, 1]),
        (4, 1, "loss+grad_norm", [0, 1]),
    ]
    train = _records(out, "train")
    assert train[-1]["step"] == 6 and math.isfinite(train[-1]["loss"])
    assert os.path.isfile(out / "model.safetensors")


def test_a_warm_start_under_fsdp_begins_where_one_process_does(data, tmp_path):
    source, single, fsdp = tmp_path / "source", tmp_path / "single", tmp_path / "fsdp"
    run(load_train_config(tiny_config(data, source, max_steps=3)))
    run(load_train_config(tiny_config(data, single, max_steps=2, init_from=str(source))))
    cfg = tmp_path / "fsdp.yaml"
    cfg.write_text(
        yaml.safe_dump(tiny_config(data, fsdp, max_steps=2, parallel={"dp_shard": 2}, init_from=str(source)))
    )
    proc = _torchrun(cfg)
    assert proc.returncode == 0, proc.stderr[-4000:]
    fresh, ref, got = ([r["loss"] for r in _records(out, "train")] for out in (source, single, fsdp))
    assert got == pytest.approx(ref, rel=1e-5)
    assert ref[0] < fresh[0]  # the same first batch: the trained weights do better than a fresh start
