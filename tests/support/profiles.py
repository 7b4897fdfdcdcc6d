"""What the profiler tests share: a tiny run's config with a profile window, a trace's event names and the
check that each step's split adds up to its measured time."""

from __future__ import annotations

import json

import pytest

from train_fixtures import tiny_config


def profile_config(data, out, **log) -> dict:
    return tiny_config(
        data,
        out,
        max_steps=4,
        device="cpu",
        log={"every_steps": 1, "val_every_steps": 100, "val_batches": 1, **log},
        checkpoint={"every_steps": 100, "keep_last": 1},
        health={"straggler_every_steps": 0},
    )


def trace_names(path) -> set[str]:
    """The names of a Chrome trace's events."""
    with open(path) as fh:
        return {e.get("name", "") for e in json.load(fh)["traceEvents"]}


def check_split(report: dict, steps: list[int]) -> None:
    """Every rank's every step: the parts add up to the stopwatch's step time within 10%."""
    for rank in report["per_rank"]:
        assert [s["step"] for s in rank["steps"]] == steps
        for s in rank["steps"]:
            parts = s["compute_s"] + s["communication_s"] + s["data_wait_s"] + s["optimizer_s"] + s["idle_s"]
            assert parts == pytest.approx(s["measured_step_s"], rel=0.1), s
            assert s["compute_s"] > 0 and s["optimizer_s"] > 0 and s["data_wait_s"] > 0
