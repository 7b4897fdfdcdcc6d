"""Hangs, stragglers and lost ranks, in one process and on 2 gloo processes under real torchrun: a rank that
hangs is found by its watchdog, which writes every thread's stack and exits non-zero, and torchrun's restart
continues from the last checkpoint; a slow rank is named in the straggler records and warned of; a rank killed mid-run
(``kill -9``) is restarted by ``torchrun --max-restarts 1`` with ``--resume auto`` and the run ends exactly
where an uninterrupted one does. Faults come from the injector (``--inject hang|kill|slow``)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
import torch
import yaml
from safetensors.torch import load_file

from pretrain.components.faults import Fault, parse_fault
from pretrain.components.metrics import read_metrics
from pretrain.components.stragglers import StragglerMonitor
from pretrain.components.watchdog import HANG_EXIT, process_group_timeout
from pretrain.config.train import HealthConfig
from train_fixtures import make_token_dataset, tiny_config

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]

# torchrun's restarted workers otherwise may read the previous attempt's addresses (pytorch#135712)
TORCHRUN_ENV = {"OMP_NUM_THREADS": "1", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_token_dataset(tmp_path_factory.mktemp("tokens"), n_docs=200)


def _records(out_dir, kind: str) -> list[dict]:
    return [r for r in read_metrics(os.path.join(out_dir, "metrics.jsonl")) if r["kind"] == kind]


def _torchrun(cfg_path, *args: str, restarts: int = 0) -> subprocess.CompletedProcess:
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        f"--max-restarts={restarts}",
        "-m",
        "pretrain.train",
        str(cfg_path),
        *args,
    ]
    return subprocess.run(cmd, env={**os.environ, **TORCHRUN_ENV}, capture_output=True, text=True, timeout=400)


def _config(tmp_path, data, out, **overrides):
    cfg = tmp_path / f"{os.path.basename(out)}.yaml"
    cfg.write_text(yaml.safe_dump(tiny_config(data, out, parallel={"dp_shard": 2}, **overrides)))
    return cfg


# -- the parts ---------------------------------------------------------------------------------------


def test_fault_specs_parse():
    assert parse_fault("hang:step=5,rank=1") == Fault("hang", 5, 1)
    assert parse_fault("kill:step=2") == Fault("kill", 2, 0)
    assert parse_fault("slow:rank=1,ms=300") == Fault("slow", 1, 1, ms=300)  # from step 1 on
    assert parse_fault("slow:rank=1,ms=300").name == "slow-step1-rank1-300ms"


def test_a_bad_fault_spec_is_refused_with_its_cause():
    for spec, message in [
        ("slow:rank=1", "ms=N is required"),
        ("hang:rank=1", "step=N is required"),
        ("kill:step=2,ms=5", "'ms=5' is not one of"),
        ("slow:ms=-1", "ms not negative"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_fault(spec)


def test_the_straggler_record_names_the_rank_that_arrives_late():
    monitor = StragglerMonitor(every=2, margin=0.2, device=torch.device("cpu"), rank=0, world=4)
    # rank 2 reached the barrier last: it waited least, the others waited for it
    record = monitor.record(
        step=4,
        steps=2,
        step_s=[1.0, 1.0, 1.0, 1.1],
        data_s=[0.1, 0.1, 0.6, 0.1],
        wait_s=[0.5, 0.5, 0.0, 0.45],
        memory=[1.0, 3.0, 1.0, 1.0],
    )
    assert record["slowest_rank"] == 2 and record["slow_ranks"] == [2]
    assert record["lag_s_by_rank"] == [0.0, 0.0, 0.5, 0.05]
    assert record["step_s"] == {"min": 1.0, "median": 1.0, "max": 1.1}
    assert record["data_wait_s"]["max"] == 0.6 and record["peak_memory_rank"] == 1
    even = monitor.record(
        step=4, steps=2, step_s=[1.0] * 4, data_s=[0.1] * 4, wait_s=[0.5, 0.5, 0.4, 0.45], memory=[1.0] * 4
    )
    assert even["slow_ranks"] == []  # 0.1 s behind is within 20% of a 1 s step
    assert monitor.gather(step=3) is None  # not a sampled step: no collective, no record


def test_the_process_group_waits_as_long_as_the_first_step_may_take():
    health = HealthConfig(hang_timeout=60, first_step_timeout=600)
    assert process_group_timeout(health).total_seconds() == 600


def test_a_hung_process_exits_with_its_stacks_on_file(data, tmp_path):
    out = tmp_path / "run"
    cfg = tmp_path / "train.yaml"
    cfg.write_text(yaml.safe_dump(tiny_config(data, out, health={"hang_timeout": 2, "first_step_timeout": 120})))
    proc = subprocess.run(
        [sys.executable, "-m", "pretrain.cli", "train", str(cfg), "--inject", "hang:step=2"],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == HANG_EXIT, proc.stderr[-4000:]
    assert "[watchdog] rank 0: no step finished for" in proc.stderr and "after step 1" in proc.stderr
    assert "in block_forever" in (out / "hangs" / "rank-0.txt").read_text()
    assert [(r["step"], r["rank"]) for r in _records(out, "hang")] == [(1, 0)]


# -- two processes -------------------------------------------------------------------------------------


def test_a_slow_rank_is_named_in_the_straggler_records(data, tmp_path):
    out = tmp_path / "run"
    cfg = _config(tmp_path, data, out, max_steps=4, health={"straggler_every_steps": 2, "straggler_margin": 0.1})
    proc = _torchrun(cfg, "--inject", "slow:rank=1,ms=1000")
    assert proc.returncode == 0, proc.stderr[-4000:]
    records = _records(out, "stragglers")
    assert [r["step"] for r in records] == [2, 4]
    last = records[-1]
    assert last["slowest_rank"] == 1 and last["slow_ranks"] == [1] and last["ranks"] == 2
    assert last["peak_memory_gib"]["min"] > 0 and last["step_s"]["min"] > 0
    assert "warning: step 4: rank 1 is a straggler" in proc.stderr


def test_a_hung_rank_is_caught_by_the_watchdog_and_restarted_to_the_end(data, tmp_path):
    out = tmp_path / "run"
    cfg = _config(tmp_path, data, out, health={"hang_timeout": 8, "first_step_timeout": 300})
    proc = _torchrun(cfg, "--resume", "auto", "--inject", "hang:step=5,rank=1", restarts=1)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert f"exitcode: {HANG_EXIT}" in proc.stderr  # the first attempt: the watchdog ended a worker
    assert "[watchdog] rank 1: no step finished for" in proc.stderr
    stacks = (out / "hangs" / "rank-1.txt").read_text()
    assert "rank 1: no step finished" in stacks and "after step 4" in stacks
    assert "in block_forever" in stacks and "in _step" in stacks  # the frame it hung in, and the loop's
    hang = [r for r in _records(out, "hang") if r["rank"] == 1]
    assert hang and hang[0]["step"] == 4 and hang[0]["waited_s"] >= 8
    assert "starting at step 3" in proc.stderr  # the restart resumed the last checkpoint
    train = _records(out, "train")
    assert train[-1]["step"] == 6 and math.isfinite(train[-1]["loss"]) and (out / "model.safetensors").is_file()


def test_a_run_with_a_killed_rank_ends_as_an_uninterrupted_one(data, tmp_path):
    reference, killed = tmp_path / "reference", tmp_path / "killed"
    proc = _torchrun(_config(tmp_path, data, reference))
    assert proc.returncode == 0, proc.stderr[-4000:]
    proc = _torchrun(_config(tmp_path, data, killed), "--resume", "auto", "--inject", "kill:step=5,rank=1", restarts=1)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "exitcode: -9" in proc.stderr and "starting at step 3" in proc.stderr
    assert os.path.isfile(killed / "faults" / "kill-step5-rank1.fired")
    assert [(r["step"], r["loss"]) for r in _records(killed, "train")] == [
        (r["step"], r["loss"]) for r in _records(reference, "train")
    ]  # exactly: fp32 on CPU
    state = [
        json.loads((run / "checkpoints" / "step-00000006" / "train_state.json").read_text())
        for run in (reference, killed)
    ]
    lineage = [s.pop("lineage")["current"] for s in state]  # names each run's own folder; the data is the same
    assert lineage[0]["sources"] == lineage[1]["sources"]
    assert state[0] == state[1] and state[1]["loader"]["samples_consumed"] == 48
    weights = [load_file(str(run / "model.safetensors")) for run in (reference, killed)]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
