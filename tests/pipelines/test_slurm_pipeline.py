"""``scripts/slurm_pipeline.sbatch`` as Slurm runs it: the batch script on the first node starts a Spark
master, ``srun`` one foreground worker per node, and the pipeline runs on that cluster; when the job ends
nothing is left running. Slurm itself is not installed here: ``scontrol`` and ``srun`` are two-line
stand-ins that name this machine as the one node and run the task on it; Spark, the script and the
pipeline are the real ones.

Run alone with ``pytest -m cluster tests/pipelines/test_slurm_pipeline.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
SBATCH = ROOT / "scripts" / "slurm_pipeline.sbatch"


def test_sbatch_script_runs_the_pipeline_on_a_cluster_inside_the_allocation(tmp_path):
    shims = tmp_path / "bin"
    shims.mkdir()
    (shims / "scontrol").write_text("#!/bin/bash\necho 127.0.0.1\n")
    # srun --nodes=1 --ntasks-per-node=1 ... COMMAND: run COMMAND here, once (one node).
    (shims / "srun").write_text('#!/bin/bash\nwhile [[ "$1" == --* ]]; do shift; done\nexec "$@"\n')
    for shim in shims.iterdir():
        shim.chmod(0o755)
    subprocess.run(
        [sys.executable, "-m", "pipelines.cli", "demo-data", "--output", str(tmp_path / "input")],
        check=True,
        cwd=ROOT,
        capture_output=True,
    )
    venv = Path(sys.executable).parent.parent
    env = {
        **os.environ,
        "PATH": f"{shims}:{os.environ['PATH']}",
        "CCP_VENV": str(venv),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SLURM_JOB_ID": "4242",
        "SLURM_JOB_NODELIST": "node001",
        "SLURM_NNODES": "1",
        "SLURM_CPUS_PER_TASK": "1",
        "SLURM_MEM_PER_NODE": "2048",
        "CCP_CLUSTER_DIR": str(tmp_path / "cluster"),
    }
    out = tmp_path / "out"
    job = ["bash", str(SBATCH), "ingest", "--input", str(tmp_path / "input" / "demo.warc.gz"), "--output", str(out)]
    failed = subprocess.run(
        [*job, "--set", "input.batch_sise=50"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert failed.returncode == 2 and "did you mean 'batch_size'" in failed.stderr  # the job's status is the pipeline's
    result = subprocess.run(
        [*job, "--set", "input.batch_size=50", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    summary = json.loads(result.stdout)
    langid = next(s for s in summary["stages"] if s["stage"] == "langid")
    assert langid["docs_in"] > 0 and (out / "corpus").is_dir()
    assert "master spark://127.0.0.1:" in result.stderr
    state = json.loads((tmp_path / "cluster" / "master" / "cluster.json").read_text())
    assert state["pids"] == {}  # the master was stopped with the job
    apps = list((tmp_path / "cluster" / "worker-127.0.0.1").iterdir())
    assert apps, "the worker ran the job's executors"
    leftover = subprocess.run(["pgrep", "-f", str(tmp_path / "cluster")], capture_output=True, text=True).stdout.split()
    assert not leftover, f"processes still running: {leftover}"
