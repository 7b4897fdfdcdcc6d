"""What a run costs in money, energy and carbon, from its GPU-hours: ``pretrain plan`` and ``pretrain
budget --gpus/--hours`` print it, and ``pretrain plan --compare-gpus`` lays one run out on several GPUs.

GPU-hours = days x 24 x GPUs; money = GPU-hours x price per GPU-hour; energy (kWh) = GPU-hours x board
power (W) / 1000 x PUE (the data centre's overhead for cooling and power delivery); carbon (kg CO2e) =
kWh x the grid's g CO2e per kWh / 1000. The board power is the GPU table's (the vendor's TDP, the most a
board draws: an upper bound, since training rarely holds the limit); the CPU entry and a custom
``--peak-flops`` have none, so no energy is printed unless ``--gpu-power-w`` gives it.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from dataprep.core.arguments import positive_float
from dataprep.core.errors import UsageError
from dataprep.core.units import human

DEFAULT_PUE = 1.2  # a typical hyperscale data centre's power usage effectiveness


@dataclass(frozen=True)
class CostRates:
    """The rates a cost is computed at; None leaves that figure out."""

    price_per_gpu_hour: float | None = None
    gpu_power_w: float | None = None
    pue: float = DEFAULT_PUE
    grid_gco2_per_kwh: float | None = None


def add_cost_arguments(parser: argparse.ArgumentParser) -> None:
    """The "cost" group of ``pretrain plan`` and ``pretrain budget``."""
    cost = parser.add_argument_group("cost")
    cost.add_argument(
        "--price-per-gpu-hour",
        type=positive_float,
        metavar="PRICE",
        help="what one GPU-hour costs (in your currency): prints the run's money",
    )
    cost.add_argument(
        "--gpu-power-w",
        type=positive_float,
        metavar="W",
        help="board power per GPU in watts (default: the GPU table's TDP, e.g. H100 SXM 700; none for "
        "--gpu cpu or a custom --peak-flops)",
    )
    cost.add_argument(
        "--pue",
        type=positive_float,
        default=DEFAULT_PUE,
        help=f"data centre power usage effectiveness: energy drawn per unit the GPUs use (default {DEFAULT_PUE:g})",
    )
    cost.add_argument(
        "--grid-gco2-per-kwh",
        type=positive_float,
        metavar="G",
        help="the grid's carbon intensity in g CO2e per kWh: prints the run's emissions",
    )


def cost_rates(args: argparse.Namespace, table_power_w: float | None) -> CostRates:
    """The rates from the "cost" flags, the board power defaulting to the GPU table's."""
    if args.pue < 1:
        raise UsageError(f"--pue {args.pue:g}: must be at least 1 (the GPUs' own energy is the least drawn)")
    power = args.gpu_power_w if args.gpu_power_w is not None else table_power_w
    return CostRates(args.price_per_gpu_hour, power, args.pue, args.grid_gco2_per_kwh)


def run_cost(gpu_hours: float, rates: CostRates) -> dict:
    """``{gpu_hours, money, kwh, kg_co2e}`` of a run (None where a rate is missing)."""
    money = gpu_hours * rates.price_per_gpu_hour if rates.price_per_gpu_hour is not None else None
    kwh = gpu_hours * rates.gpu_power_w / 1000 * rates.pue if rates.gpu_power_w is not None else None
    co2 = kwh * rates.grid_gco2_per_kwh / 1000 if kwh is not None and rates.grid_gco2_per_kwh is not None else None
    return {"gpu_hours": gpu_hours, "money": money, "kwh": kwh, "kg_co2e": co2}


def plan_cost(days: float, gpus: int, rates: CostRates) -> dict:
    return run_cost(days * 24 * gpus, rates)


def format_cost(cost: dict, rates: CostRates) -> str:
    """One line: GPU-hours, and the money, energy and carbon the given rates allow."""
    parts = [f"cost: {_amount(cost['gpu_hours'])} GPU-hours"]
    if cost["money"] is not None:
        parts.append(f"money {_amount(cost['money'])} at {rates.price_per_gpu_hour:g} per GPU-hour")
    if cost["kwh"] is not None:
        parts.append(f"energy {_amount(cost['kwh'])} kWh ({rates.gpu_power_w:g} W per GPU x PUE {rates.pue:g})")
    if cost["kg_co2e"] is not None:
        parts.append(f"carbon {_amount(cost['kg_co2e'])} kg CO2e at {rates.grid_gco2_per_kwh:g} g/kWh")
    return ", ".join(parts)


def _amount(value: float) -> str:
    """Whole units with thousands separators; cents and tenths where the figure is small."""
    return f"{value:,.0f}" if value >= 100 else f"{value:,.2f}"


def format_comparison(rows: list[dict], gpus: int) -> str:
    """``pretrain plan --compare-gpus``: one row per GPU, the same model and tokens on each."""
    width = max([len(r.get("layout", "")) for r in rows] + [6]) + 2
    planned = next((r for r in rows if not r.get("error")), None)
    lines = [
        f"{human(planned['tokens'])} tokens on {gpus} GPUs of each kind:" if planned else "",
        f"{'gpu':<12}{'layout':<{width}}{'s/step':>10}{'days':>10}{'GPU-hours':>14}{'money':>14}{'kWh':>14}",
    ]
    for r in rows:
        if r.get("error"):
            lines.append(f"{r['gpu']:<12}does not fit: {r['error'].splitlines()[0]}")
            continue
        c = r["cost"]
        money = _amount(c["money"]) if c["money"] is not None else "-"
        kwh = _amount(c["kwh"]) if c["kwh"] is not None else "-"
        lines.append(
            f"{r['gpu']:<12}{r['layout']:<{width}}{r['step_seconds']:>10.2f}{r['days']:>10.1f}"
            f"{_amount(c['gpu_hours']):>14}{money:>14}{kwh:>14}"
        )
    return "\n".join(line for line in lines if line)
