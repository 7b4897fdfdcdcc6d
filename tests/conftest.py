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
