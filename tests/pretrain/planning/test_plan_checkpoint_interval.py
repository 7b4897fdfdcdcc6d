"""``pretrain plan --mtbf-hours``: Young/Daly's checkpoint interval (sqrt(2 x save time x job MTBF), the job's
MTBF the GPU's over the GPU count), the expected fraction of time lost, the save time estimated, measured
from a run's metrics or given, and the interval written into --out."""

from __future__ import annotations

import json
import math
import re

import pytest

from pretrain.cli import main as cli
from pretrain.config.loading import load_train_config
from pretrain.planning.checkpoint_interval import checkpoint_interval


def test_the_interval_minimises_the_expected_loss():
    save, mtbf_h, gpus, step = 30.0, 50_000.0, 1024, 1.0
    best = checkpoint_interval(save, mtbf_h, gpus, step)
    mtbf_job = mtbf_h * 3600 / gpus
    assert best["optimum_s"] == pytest.approx(math.sqrt(2 * save * mtbf_job))
    assert best["lost_fraction"] == pytest.approx(math.sqrt(2 * save / mtbf_job), rel=1e-3)
    for factor in (0.5, 0.8, 1.25, 2):  # saving more or less often loses more
        interval = best["interval_s"] * factor
        assert save / interval + interval / (2 * mtbf_job) > best["lost_fraction"]
    assert checkpoint_interval(save, mtbf_h, gpus, step * 1e6)["every_steps"] == 1  # at least every step
    with pytest.raises(ValueError, match="must be positive"):
        checkpoint_interval(save, 0, gpus, step)


def test_plan_7b_on_1024_gpus_prints_the_interval_with_its_expected_time_lost(capsys):
    assert cli(["plan", "7b", "--gpus", "1024", "--mtbf-hours", "50000"]) == 0
    line = next(s for s in capsys.readouterr().out.splitlines() if s.startswith("checkpoint every"))
    steps, lost = re.search(r"checkpoint every ([\d,]+) steps .* expected time lost ([\d.]+)%", line).groups()
    assert int(steps.replace(",", "")) > 1 and 0 < float(lost) < 5


@pytest.fixture
def interval_of_7b_on_1024_gpus(capsys) -> tuple[dict, dict]:
    """The JSON plan of a 7B model on 1024 GPUs of a 50,000-hour MTBF, and its checkpoint interval."""
    assert cli(["plan", "7b", "--gpus", "1024", "--mtbf-hours", "50000", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    return result, result["checkpoint_interval"]


def test_plan_7b_on_1024_gpus_estimates_the_save_and_applies_young_daly(interval_of_7b_on_1024_gpus):
    result, c = interval_of_7b_on_1024_gpus
    params = result["model"]["params"]
    assert c["save_s"] == pytest.approx(params * 12 / (1024 / 8 * 2e9))  # 12 B/param over 128 nodes at 2 GB/s
    assert c["mtbf_job_s"] == pytest.approx(50_000 * 3600 / 1024)
    assert c["every_steps"] == round(math.sqrt(2 * c["save_s"] * c["mtbf_job_s"]) / result["time"]["step_seconds"])


def test_an_async_save_plans_only_the_host_copy(interval_of_7b_on_1024_gpus, capsys):
    _, c = interval_of_7b_on_1024_gpus
    assert cli(["plan", "7b", "--gpus", "1024", "--mtbf-hours", "50000", "--async-save", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["checkpoint_interval"]["save_s"] < c["save_s"]  # only the host copy


def test_a_measured_save_time_goes_into_the_written_config(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    records = [{"kind": "train", "step": 1, "loss": 5.0}] + [
        {"kind": "checkpoint", "step": s, "blocking_s": t, "async": False} for s, t in ((10, 4.0), (20, 6.0), (30, 5.0))
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "train.yaml"
    assert (
        cli(
            [
                "plan",
                "1b",
                "--gpus",
                "8",
                "--mtbf-hours",
                "20000",
                "--save-from",
                str(run),
                "--output",
                str(out),
                "--data",
                str(tmp_path),
                "--json",
            ]
        )
        == 0
    )
    c = json.loads(capsys.readouterr().out)["checkpoint_interval"]
    assert c["save_s"] == 5.0 and c["save_from"] == f"measured in {run}"  # the median
    assert load_train_config(str(out)).checkpoint.every_steps == c["every_steps"]
    assert cli(["plan", "1b", "--mtbf-hours", "20000", "--save-from", str(tmp_path)]) == 2
    assert "no metrics.jsonl there" in capsys.readouterr().err
