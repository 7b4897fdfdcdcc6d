"""Ctrl-C and SIGTERM during ``pretrain train``, sent to real processes: the run saves the step it stopped
at and ends with one line saying how to go on (no traceback); under torchrun a signal that reaches one rank
stops every rank at the same step, so they save together; the resumed run continues from that step."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest
import yaml

from pretrain.components.metrics import read_metrics
from train_fixtures import make_token_dataset, tiny_config

pytestmark = pytest.mark.slow  # many processes or subprocess CLIs: scripts/test.sh --fast leaves it out

STOPPED = re.compile(
    r"stopped by (SIG\w+) at step (\d+): saved (\S+); continue with the same command and --resume auto"
)
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    root = tmp_path_factory.mktemp("preempt")
    data = make_token_dataset(root / "tokens", n_docs=200)
    cfg = tiny_config(
        data,
        root / "run",
        max_steps=400,
        checkpoint={"every_steps": 1000},
        log={"every_steps": 1, "val_every_steps": 1000},
    )
    (root / "train.yaml").write_text(yaml.safe_dump(cfg))
    return root


def _start(argv: list[str], out_dir) -> subprocess.Popen:
    return subprocess.Popen(
        [*argv, "--output", str(out_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV
    )


def _wait_for_step(proc: subprocess.Popen, step: int) -> list[str]:
    """stderr lines until a training record of ``step`` (or later) is printed."""
    lines = []
    for line in proc.stderr:
        lines.append(line)
        found = re.match(r"kind train \| step (\d+) ", line)
        if found and int(found.group(1)) >= step:
            return lines
    raise AssertionError(f"the run ended before step {step}:\n{''.join(lines)[-3000:]}")


def _stop_record(out_dir) -> dict:
    (stop,) = [r for r in read_metrics(os.path.join(out_dir, "metrics.jsonl")) if r["kind"] == "stop"]
    return stop


def _resume_one_step(config, out_dir, step: int) -> str:
    """Continue the stopped run in one process for one more step; returns its stderr."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pretrain.cli",
            "train",
            str(config / "train.yaml"),
            "--output",
            str(out_dir),
            "--resume",
            "auto",
            "--stop-at-step",
            str(step + 1),
        ],
        check=False,
        capture_output=True,
        text=True,
        env=ENV,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"starting at step {step}" in proc.stderr
    steps = [r["step"] for r in read_metrics(os.path.join(out_dir, "metrics.jsonl")) if r["kind"] == "train"]
    assert steps[-1] == step + 1
    return proc.stderr


def test_ctrl_c_saves_the_step_it_stops_at_for_a_resume(config):
    out_dir = config / "ctrl-c"
    proc = _start(
        [sys.executable, "-m", "pretrain.cli", "train", str(config / "train.yaml"), "--inject", "slow:rank=0,ms=50"],
        out_dir,
    )
    _wait_for_step(proc, 3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGINT, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    last = err.strip().splitlines()[-1]
    found = STOPPED.search(last)
    assert found and found.group(1) == "SIGINT", last
    step, saved = int(found.group(2)), found.group(3)
    assert step >= 3 and saved == str(out_dir / "checkpoints" / f"step-{step:08d}")
    assert os.path.isfile(os.path.join(saved, ".metadata"))
    assert _stop_record(out_dir)["step"] == step
    _resume_one_step(config, out_dir, step)


def _rank_pids(agent: subprocess.Popen, world: int, timeout: float = 120) -> dict[int, int]:
    """RANK -> pid of torchrun's workers (its children), from their environments."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = {}
        for pid in (int(name) for name in os.listdir("/proc") if name.isdigit()):
            try:
                with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) != agent.pid:  # not a child of torchrun
                        continue
                with open(f"/proc/{pid}/environ", "rb") as fh:
                    env = dict(item.split(b"=", 1) for item in fh.read().split(b"\0") if b"=" in item)
            except (OSError, IndexError, ValueError):
                continue
            if b"RANK" in env:
                found[int(env[b"RANK"])] = pid
        if len(found) == world:
            return found
        time.sleep(0.5)
    raise AssertionError("torchrun's workers did not start")


def test_sigterm_to_one_rank_stops_every_rank_at_the_same_step(config):
    """Slurm signals every process, torchrun forwards its own signal to the workers; the hardest case is a
    signal only one rank sees: the flag all-reduced at each step boundary stops both at the same step."""
    out_dir = config / "torchrun"
    agent = _start(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node=2",
            "-m",
            "pretrain.train",
            str(config / "train.yaml"),
            "--inject",
            "slow:rank=1,ms=50",
        ],
        out_dir,
    )
    ranks = _rank_pids(agent, 2)
    _wait_for_step(agent, 3)
    os.kill(ranks[1], signal.SIGTERM)
    _, err = agent.communicate(timeout=180)
    found = STOPPED.search(err)
    assert found and found.group(1) == "SIGTERM", err[-3000:]  # rank 0 learnt it from rank 1
    step, saved = int(found.group(2)), found.group(3)
    assert saved == str(out_dir / "checkpoints" / f"step-{step:08d}")
    assert os.path.isfile(os.path.join(saved, ".metadata"))  # both ranks' shards, committed together
    assert len([f for f in os.listdir(saved) if f.endswith(".distcp")]) == 2
    assert _stop_record(out_dir)["step"] == step
    _resume_one_step(config, out_dir, step)
