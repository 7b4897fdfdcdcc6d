"""A plan's money, energy and carbon, checked against figures worked out by hand."""

from __future__ import annotations

import json

import pytest

from pretrain.cli import main as cli
from pretrain.planning.cost import CostRates, format_cost, plan_cost


def _json(capsys, *argv) -> dict:
    assert cli([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_cost_arithmetic():
    # 2.5 days x 24 h x 16 GPUs = 960 GPU-hours; x 2 = 1,920; 960 x 0.7 kW x PUE 1.2 = 806.4 kWh;
    # 806.4 kWh x 300 g/kWh = 241.92 kg
    rates = CostRates(price_per_gpu_hour=2, gpu_power_w=700, pue=1.2, grid_gco2_per_kwh=300)
    assert plan_cost(2.5, 16, rates) == pytest.approx(
        {"gpu_hours": 960, "money": 1920, "kwh": 806.4, "kg_co2e": 241.92}
    )
    assert format_cost(plan_cost(2.5, 16, rates), rates) == (
        "cost: 960 GPU-hours, money 1,920 at 2 per GPU-hour, energy 806 kWh (700 W per GPU x PUE 1.2), "
        "carbon 242 kg CO2e at 300 g/kWh"
    )
    assert plan_cost(1, 1, CostRates()) == {"gpu_hours": 24, "money": None, "kwh": None, "kg_co2e": None}


def test_budget_prices_its_gpu_hours(capsys):
    # 8 GPUs x 100 h = 800 GPU-hours; x 1.5 = 1,200; A100 SXM 400 W: 800 x 0.4 x 1.1 = 352 kWh; x 400 g = 140.8 kg
    out = _json(
        capsys,
        "budget",
        "--gpus",
        "8",
        "--hours",
        "100",
        "--gpu",
        "a100-80gb",
        "--price-per-gpu-hour",
        "1.5",
        "--pue",
        "1.1",
        "--grid-gco2-per-kwh",
        "400",
    )
    assert out["cost"] == pytest.approx({"gpu_hours": 800, "money": 1200, "kwh": 352, "kg_co2e": 140.8})
    # a custom peak has no board power: no energy unless given; no grid intensity: no carbon
    out = _json(capsys, "budget", "--gpus", "8", "--hours", "100", "--peak-flops", "5e14")
    assert out["cost"] == {"gpu_hours": 800, "money": None, "kwh": None, "kg_co2e": None}
    assert cli(["budget", "--gpus", "8", "--hours", "100", "--peak-flops", "5e14", "--gpu-power-w", "500"]) == 0
    assert "energy 480 kWh (500 W per GPU x PUE 1.2)" in capsys.readouterr().out  # 800 x 0.5 x 1.2
    assert cli(["budget", "--compute", "1e21", "--price-per-gpu-hour", "2"]) == 2  # nothing to price
    assert "need --gpus and --hours" in capsys.readouterr().err


def test_plan_prices_its_gpu_days(capsys):
    out = _json(capsys, "plan", "125m", "--gpus", "8", "--tokens", "10B", "--price-per-gpu-hour", "2.5")
    hours = out["time"]["days"] * 24 * 8
    assert out["cost"] == pytest.approx(
        {"gpu_hours": hours, "money": 2.5 * hours, "kwh": hours * 0.7 * 1.2, "kg_co2e": None}
    )
    assert out["cluster"]["board_power_w"] == 700
    assert cli(["plan", "125m", "--tokens", "10B", "--price-per-gpu-hour", "2"]) == 0
    assert "\ncost: " in capsys.readouterr().out


def test_a_cpu_plan_has_no_energy_figure(capsys):
    assert _json(capsys, "plan", "tiny", "--gpu", "cpu", "--tokens", "1M")["cost"]["kwh"] is None


def test_compare_gpus_plans_the_same_run_on_each(capsys):
    out = _json(
        capsys,
        "plan",
        "1b",
        "--gpus",
        "8",
        "--tokens",
        "20B",
        "--compare-gpus",
        "h100=2,a100-80gb=1,h200",
        "--price-per-gpu-hour",
        "3",
    )
    rows = {r["gpu"]: r for r in out["compare"]}
    assert list(rows) == ["h100", "a100-80gb", "h200"] and {r["tokens"] for r in rows.values()} == {20e9}
    for name, price in (("h100", 2), ("a100-80gb", 1), ("h200", 3)):
        cost = rows[name]["cost"]
        assert cost["gpu_hours"] == pytest.approx(rows[name]["days"] * 24 * 8)
        assert cost["money"] == pytest.approx(price * cost["gpu_hours"])
    # same peak FLOP/s: the same days; the A100's third of the peak: more days, for all its lower price
    assert rows["h200"]["days"] == pytest.approx(rows["h100"]["days"])
    assert rows["h100"]["days"] < rows["a100-80gb"]["days"]
    assert rows["a100-80gb"]["cost"]["kwh"] == pytest.approx(rows["a100-80gb"]["cost"]["gpu_hours"] * 0.4 * 1.2)
    assert cli(["plan", "1b", "--gpus", "8", "--tokens", "20B", "--compare-gpus", "h100,a100-80gb,h200"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[1].split()[:4] == ["gpu", "layout", "s/step", "days"] and "a100-80gb" in text
    assert cli(["plan", "1b", "--compare-gpus", "h100=free"]) == 2
    assert "not a number" in capsys.readouterr().err
