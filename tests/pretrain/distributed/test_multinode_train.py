"""Two-node training launch on loopback: two ``torchrun --nnodes=2 --nproc_per_node=2`` agents meet through
a c10d rendezvous on 127.0.0.1 and train one 2 x 2 (dp_shard x tp) gloo mesh across them, exactly as one
torchrun per node does on a cluster (scripts/slurm_train.sbatch). The losses must equal the single-node
4-process run within 1e-5 relative.

Run alone with ``pytest -m cluster tests/pretrain/distributed/test_multinode_train.py``.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest
import yaml

from parallel_runs import STEPS, config, metric_records
from train_fixtures import make_token_dataset

pytestmark = pytest.mark.cluster

TIMEOUT = 170  # seconds for the three agents run together: ~75 s on 2 cores shared with other jobs
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start(args: list[str], log_path, run_id: str) -> subprocess.Popen:
    """One torchrun agent in its own session; its log (INFO: rendezvous results) goes to ``log_path``."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "LOGLEVEL": "INFO", "CCP_TEST_RUN_ID": run_id}
    with open(log_path, "w") as log:
        return subprocess.Popen(
            [*TORCHRUN, *args], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )


def _stop(procs: list[subprocess.Popen], run_id: str) -> None:
    """SIGTERM lets each agent stop its workers (they run in sessions of their own); then SIGKILL whatever
    is left: the agents' groups, and workers found by the run id in their environment."""
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    marker = f"CCP_TEST_RUN_ID={run_id}".encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if marker in fh.read().split(b"\0"):
                    os.kill(int(pid), signal.SIGKILL)
        except OSError:  # ProcessLookupError included
            pass  # gone, or not ours


def _launch(node_args: list[list[str]], logs: list) -> None:
    """Run one torchrun agent per argument list at the same time; all must succeed within TIMEOUT."""
    run_id = uuid.uuid4().hex
    procs = []
    try:
        for args, log in zip(node_args, logs):
            procs.append(_start(args, log, run_id))
        deadline = time.monotonic() + TIMEOUT
        for proc in procs:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pytest.fail(f"torchrun did not finish within {TIMEOUT} s:\n" + _tails(logs))
    finally:
        _stop(procs, run_id)
    assert all(p.returncode == 0 for p in procs), _tails(logs)


def _tails(logs) -> str:
    return "\n".join(f"--- {log}\n{log.read_text()[-4000:]}" for log in logs if log.exists())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same 2 x 2 run launched on one node (torchrun --standalone) and on two, all three agents at once
    (half the wall time of one after the other); returns the root directory."""
    root = tmp_path_factory.mktemp("multinode")
    data = make_token_dataset(root / "tokens", n_docs=200)
    parallel = {"dp_shard": 2, "tp": 2}
    for name in ("one_node", "two_nodes"):
        (root / f"{name}.yaml").write_text(yaml.safe_dump(config(data, root / name, parallel)))
    train = ["-m", "pretrain.train"]

    endpoint = f"127.0.0.1:{_free_port()}"
    rdzv = [
        "--nnodes=2",
        "--nproc_per_node=2",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={endpoint}",
        f"--rdzv-id=test-{uuid.uuid4().hex[:8]}",
        "--local-addr=127.0.0.1",
    ]  # workers meet on loopback, not on the hostname (unresolvable on some CI)
    # One node hosts the rendezvous store, the other joins it: what differing hostnames decide on a cluster.
    nodes = [[*rdzv, f"--rdzv-conf=is_host={host}", *train, str(root / "two_nodes.yaml")] for host in (1, 0)]
    one_node = ["--standalone", "--nproc_per_node=4", *train, str(root / "one_node.yaml")]
    _launch([*nodes, one_node], [root / "node0.log", root / "node1.log", root / "one_node.log"])
    return root


def test_two_nodes_form_one_world_of_four(runs):
    """Each agent got its own node rank in a group of two and ran two of the four global ranks."""
    results = []
    for log in ("node0.log", "node1.log"):
        text = (runs / log).read_text()
        found = [
            re.search(rf"\] +{key}=(.+)$", text, re.MULTILINE)
            for key in ("group_rank", "group_world_size", "global_ranks")
        ]
        assert all(found), text[-3000:]
        results.append((int(found[0][1]), int(found[1][1]), yaml.safe_load(found[2][1])))
    assert sorted(r[0] for r in results) == [0, 1] and all(r[1] == 2 for r in results)
    assert sorted(rank for r in results for rank in r[2]) == [0, 1, 2, 3]


def test_two_node_losses_equal_single_node(runs):
    for kind in ("train", "val"):
        ref, got = metric_records(runs / "one_node", kind), metric_records(runs / "two_nodes", kind)
        assert sorted(got) == sorted(ref) and len(ref) >= (STEPS if kind == "train" else 2)
        for step in ref:
            assert got[step] == pytest.approx(ref[step], rel=1e-5), (kind, step)


def test_a_two_node_run_checkpoints_to_the_shared_folder(runs):
    """The four ranks checkpointed to the shared out_dir."""
    assert (runs / "two_nodes" / "checkpoints" / f"step-{STEPS:08d}" / ".metadata").is_file()


def test_a_two_node_run_exports_the_one_node_model(runs):
    """The exported weights equal the one-node run's (same layout, same collectives: in practice bit for bit)."""
    import torch
    from safetensors.torch import load_file

    ref, got = (load_file(runs / name / "model.safetensors") for name in ("one_node", "two_nodes"))
    assert set(got) == set(ref)
    for key in ref:
        torch.testing.assert_close(got[key], ref[key], rtol=1e-5, atol=1e-7)
