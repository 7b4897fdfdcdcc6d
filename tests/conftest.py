"""Shared fixtures: the team's real data in ../shared/data and one SparkSession per test session."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("CCP_SHARED_DATA", ROOT.parent / "shared" / "data"))

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
# Test files that run themselves as workers (torchrun, subprocesses) import the shared helpers too.
SUPPORT = str(ROOT / "tests" / "support")
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (SUPPORT, os.environ.get("PYTHONPATH", "")) if p)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data; in CI (CI set) its absence is a failure, elsewhere a skip."""
    if not SHARED_DATA.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"shared test data missing at {SHARED_DATA}")
        pytest.skip(f"shared test data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def spark():
    from pipelines.spark import get_spark

    session = get_spark("local[2]", app_name="ccpretrain-tests", conf={"spark.driver.memory": "3g"})
    yield session
    session.stop()


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny matrices: one thread avoids oversubscribing a busy machine (and is faster)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# Modules of many processes, subprocess CLIs or fresh virtualenvs: `scripts/test.sh --fast` leaves them out
# (with the `cluster` tests); CI runs everything.
SLOW_MODULES = {
    "test_install.py", "test_train_3d.py", "test_train_parallel.py", "test_train_scale.py", "test_slurm_train.py",
    "test_train_health.py", "test_train_guard.py", "test_context_parallel.py", "test_pretrain_cli_errors.py",
    "test_cli_mistakes.py", "test_task_resume.py", "test_train_spikes.py", "test_remote_shards.py", "test_s3_shards.py",
    "test_stability_parallel.py", "test_code_preset.py", "test_diagnostics_parallel.py", "test_ablate.py", "test_eval_parallel.py",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
