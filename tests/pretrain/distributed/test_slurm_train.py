"""``scripts/slurm_train.sbatch`` as Slurm runs it, on one node of 2 CPU workers: near its time limit Slurm
sends the batch shell SIGUSR1 and the script requeues the job; the requeued job (same command line)
resumes from the last checkpoint (``--resume auto``), and when a rank is killed there torchrun restarts
the workers (``--max-restarts``), which resume again and finish. Slurm itself is not installed here:
``scontrol`` and ``srun`` are stand-ins (``scontrol requeue`` only notes that it was called); torchrun,
the script and the training are the real ones. The first job is held at step 5 by an injected hang, so
the signal comes while it trains, as a time limit would.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from pretrain.components.metrics import read_metrics
from train_fixtures import make_token_dataset, tiny_config

pytestmark = pytest.mark.slow  # many processes or subprocess CLIs: scripts/test.sh --fast leaves it out

ROOT = Path(__file__).resolve().parents[3]
SBATCH = ROOT / "scripts" / "slurm_train.sbatch"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _shims(folder: Path) -> Path:
    folder.mkdir()
    # scontrol show hostnames LIST -> this machine; scontrol requeue JOB -> noted in scontrol.log
    (folder / "scontrol").write_text(
        f'#!/bin/bash\nif [[ "$1" == show ]]; then echo 127.0.0.1; else echo "$@" >> {folder}/scontrol.log; fi\n'
    )
    # srun --nodes=1 --ntasks-per-node=1 ... COMMAND: run COMMAND here, once (one node)
    (folder / "srun").write_text('#!/bin/bash\nwhile [[ "$1" == --* ]]; do shift; done\nexec "$@"\n')
    for shim in folder.iterdir():
        shim.chmod(0o755)
    return folder


def _stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM to the job's process group (the batch shell, srun's torchrun), then wait until it is gone."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            proc.poll()
            os.killpg(proc.pid, 0)  # ProcessLookupError once no process of the group is left
            time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def test_the_job_requeues_on_the_signal_resumes_and_survives_a_killed_rank(tmp_path):
    data = make_token_dataset(tmp_path / "tokens", n_docs=200)
    out = tmp_path / "run"
    cfg = tmp_path / "train.yaml"
    cfg.write_text(yaml.safe_dump(tiny_config(data, out, parallel={"dp_shard": 2}, health={"hang_timeout": 300})))
    shims = _shims(tmp_path / "bin")
    venv = Path(sys.executable).parent.parent
    env = {
        **os.environ,
        "PATH": f"{shims}:{os.environ['PATH']}",
        "CCP_VENV": str(venv),
        "SLURM_JOB_ID": "4242",
        "SLURM_JOB_NODELIST": "node001",
        "SLURM_NNODES": "1",
        "SLURM_CPUS_PER_TASK": "2",
        "GPUS_PER_NODE": "2",
        "MASTER_PORT": str(_free_port()),
        "MAX_RESTARTS": "1",
        "OMP_NUM_THREADS": "1",
    }
    job = ["bash", str(SBATCH), str(cfg), "--inject", "hang:step=5,rank=1", "--inject", "kill:step=6,rank=0"]

    log = tmp_path / "first.log"
    with open(log, "w") as stderr:
        first = subprocess.Popen(job, cwd=tmp_path, env=env, stderr=stderr, start_new_session=True)
    try:
        hanging = out / "faults" / "hang-step5-rank1.fired"
        deadline = time.monotonic() + 300
        while not hanging.exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert hanging.exists(), "the job never reached step 5"
        first.send_signal(signal.SIGUSR1)  # Slurm: --signal=B:USR1@300
        first.wait(timeout=120)  # the batch shell returns once the trap has run
    finally:  # Slurm stops the job's processes after the requeue: torchrun, which stops its workers
        _stop_group(first)
    assert "time limit near: requeueing job 4242" in log.read_text()
    assert (shims / "scontrol.log").read_text() == "requeue 4242\n"
    assert [r["step"] for r in read_metrics(str(out / "metrics.jsonl")) if r["kind"] == "train"][-1] == 4

    requeued = subprocess.run(
        job, cwd=tmp_path, env={**env, "SLURM_RESTART_COUNT": "1"}, capture_output=True, text=True, timeout=600
    )
    assert requeued.returncode == 0, requeued.stderr[-4000:]
    assert "(restart 1)" in requeued.stderr
    assert requeued.stderr.count("starting at step 3") == 2  # requeued, then restarted after the kill
    assert "exitcode: -9" in requeued.stderr
    train = [r for r in read_metrics(str(out / "metrics.jsonl")) if r["kind"] == "train"]
    assert [r["step"] for r in train] == [1, 2, 3, 4, 5, 6] and (out / "model.safetensors").is_file()
    assert (shims / "scontrol.log").read_text() == "requeue 4242\n"  # no signal this time: no requeue
