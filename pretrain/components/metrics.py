"""Training metrics: one record per log step to the console, a JSONL file and optionally TensorBoard
and Weights & Biases, under ``train/`` and ``val/`` tags (``train/loss``, ``val/loss``, ``train/mfu``).

Only rank 0 writes. Throughput is measured between log steps; MFU = achieved model FLOP/s per device
divided by the device's dense bf16 peak from ``pretrain.planning.hardware`` whatever the run's precision (one
scale for every run; ``pretrain plan`` times each precision at its own peak), absent when the device is unknown,
e.g. on CPU. With pipeline parallelism each record carries the schedule's bubble fraction
(``bubble_fraction``) beside the measured step time.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time

import torch

from dataprep.core.inputs import read_jsonl_records
from dataprep.core.units import duration
from dataprep.core.validation import ConfigError
from pretrain.planning.hardware import peak_flops

TRACKER_PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb"}  # log.<key> -> import name (= the extra)


def check_trackers(log) -> None:
    """Fail at config time, before any set-up, when a configured tracker's package is missing."""
    import importlib.util

    for key, module in TRACKER_PACKAGES.items():
        if getattr(log, key, None) and importlib.util.find_spec(module) is None:
            raise ConfigError(
                f"log.{key} is set but the {module!r} package is not installed: "
                f"pip install 'ccpretrain[{module}]' (or remove log.{key})"
            )


def tracker_scalars(record: dict) -> dict[str, float]:
    """A record's numbers under its kind's prefix: {"train/loss": ..., "val/loss": ...}; a dict of numbers
    (per-source tokens) gives one scalar each: "train/source_tokens/web"."""
    kind = record.get("kind", "train")
    flat = {f"{key}/{name}": v for key, value in record.items() if isinstance(value, dict) for name, v in value.items()}
    return {
        f"{kind}/{key.removeprefix(kind + '_')}": value
        for key, value in {**record, **flat}.items()
        if key not in ("step", "time", "kind") and isinstance(value, (int, float)) and not isinstance(value, bool)
    }


def bubble_fraction(schedule: str, pp: int, micro_batches: int, stages_per_rank: int = 1) -> float:
    """Share of a pipeline step the ranks sit idle, with forward and backward of equal cost per stage:
    (p-1)/(m+p-1) for GPipe and 1F1B (Huang et al. 2019; Narayanan et al. 2021), divided by v model
    chunks per rank for interleaved 1F1B. The zero-bubble schedules fill most of it with the weight-
    gradient halves of the backward pass: a third of the interleaved bubble as an estimate (ZB-H1, Qi
    et al. 2023)."""
    if pp <= 1:
        return 0.0
    bubble = (pp - 1) / (micro_batches + pp - 1)
    if schedule in ("gpipe", "1f1b"):
        return bubble
    bubble /= stages_per_rank
    return bubble / 3 if schedule == "interleaved_zero_bubble" else bubble


def device_peak_flops(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    return peak_flops(torch.cuda.get_device_name(device))


def memory_gib(device: torch.device) -> dict:
    """Peak accelerator memory since the last call (CUDA), else the process's peak resident memory."""
    if device.type == "cuda":
        out = {
            "mem_gib": torch.cuda.max_memory_allocated(device) / 2**30,
            "mem_reserved_gib": torch.cuda.max_memory_reserved(device) / 2**30,
        }
        torch.cuda.reset_peak_memory_stats(device)
        return out
    return {"rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}  # KiB on Linux


PLAN_MISMATCH = 3  # a measured step time this many times the plan's (or a fraction as small) is worth a word


class MetricsLogger:
    """``horizon``: the run's last step, for the ETA; ``planned_step_s``: the plan's time per step, which the
    measured one is compared with once."""

    def __init__(
        self,
        out_dir: str,
        jsonl: str | None,
        tensorboard: str | None,
        flops_per_token: float,
        world_size: int,
        device: torch.device,
        rank: int = 0,
        wandb=None,
        run_config: dict | None = None,
        horizon: int | None = None,
        planned_step_s: float | None = None,
    ):
        self.enabled = rank == 0
        self.horizon, self.planned_step_s, self._records = horizon, planned_step_s, 0
        self.flops_per_token, self.world_size, self.device = flops_per_token, world_size, device
        self.peak = device_peak_flops(device)
        self._jsonl = self._tb = self._wandb = None
        if self.enabled:
            os.makedirs(out_dir, exist_ok=True)
            if jsonl:
                self._jsonl = open(os.path.join(out_dir, jsonl), "a", encoding="utf-8")
            if tensorboard:
                from torch.utils.tensorboard import SummaryWriter  # needs the tensorboard package

                self._tb = SummaryWriter(os.path.join(out_dir, tensorboard))
            if wandb is not None:
                import wandb as wandb_lib

                self._wandb = wandb_lib.init(
                    project=wandb.project,
                    name=wandb.name or os.path.basename(os.path.abspath(out_dir)),
                    entity=wandb.entity,
                    mode=wandb.mode,
                    tags=wandb.tags,
                    config=run_config,
                    dir=out_dir,
                    resume="allow",
                )
        self.start(0)

    def count_tokens(self, n: int) -> None:
        """Tokens processed (all ranks together) since the last log."""
        self._tokens += n

    def start(self, step: int) -> None:
        """Restart the throughput clock (after setup, validation or checkpointing)."""
        self._t0, self._tokens, self._last_step = time.perf_counter(), 0, step

    def log_train(self, step: int, **values) -> dict:
        """Write a training record with throughput since the previous call; returns the record."""
        elapsed = max(time.perf_counter() - self._t0, 1e-9)
        tps = self._tokens / elapsed
        step_time = elapsed / max(step - self._last_step, 1)
        record = {"kind": "train", "step": step, **values, "tokens_per_s": tps, "step_time_s": step_time}
        if self.horizon is not None:  # the steps left at the recent pace (validation and saves not counted)
            record["eta_s"] = max(self.horizon - step, 0) * step_time
        self._compare_with_plan(step_time)
        if self.peak:
            record["mfu"] = tps * self.flops_per_token / (self.peak * self.world_size)
        record.update(memory_gib(self.device))
        self.start(step)
        self.write(record)
        return record

    def _compare_with_plan(self, step_time: float) -> None:
        """Once, from the second record on (the first holds the warm-up), say when steps take far longer or
        shorter than the plan said."""
        self._records += 1
        if self._records != 2 or not self.enabled or not self.planned_step_s:
            return
        ratio = step_time / self.planned_step_s
        if 1 / PLAN_MISMATCH <= ratio <= PLAN_MISMATCH:
            return
        print(
            f"[train] warning: a step takes {step_time:.3g} s, {ratio:.3g}x the plan's {self.planned_step_s:.3g} s "
            "(pretrain plan's GPU, MFU and layout): another or a busy machine, or slow data; the ETA follows the "
            "measured time",
            file=sys.stderr,
            flush=True,
        )

    def write(self, record: dict, line: str | None = None) -> None:
        """Write ``record`` to the JSONL file and the trackers, and to the console as ``line`` (default: every
        field)."""
        if not self.enabled:
            return
        record = {"time": time.time(), **record}
        if self._jsonl:
            self._jsonl.write(json.dumps(record) + "\n")
            self._jsonl.flush()
        if self._tb or self._wandb:
            scalars = tracker_scalars(record)
            for key, value in scalars.items():
                if self._tb:
                    self._tb.add_scalar(key, value, record["step"])
            if self._wandb:
                self._wandb.log(scalars, step=record["step"])
        print(line or " | ".join(_fmt(k, v) for k, v in record.items() if k != "time"), file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._jsonl:
            self._jsonl.close()
        if self._tb:
            self._tb.close()
        if self._wandb:
            self._wandb.finish()


def _fmt(key: str, value) -> str:
    if isinstance(value, dict):
        return f"{key} " + " ".join(f"{name} {v:.4g}" for name, v in value.items())
    if isinstance(value, float):
        if key == "mfu":
            return f"mfu {100 * value:.1f}%"
        if key == "tokens_per_s":
            return f"tok/s {value:,.0f}"
        if key == "eta_s":
            return f"eta {duration(value)}"
        return f"{key} {value:.4g}"
    return f"{key} {value}"


def read_metrics(path: str) -> list[dict]:
    """Records of a metrics file; when a resumed run logged a step again, the later record wins (per rank,
    for events several ranks write, such as hangs). A line cut short by a crash is skipped."""
    by_key: dict[tuple, dict] = {}
    for rec, _, _ in read_jsonl_records([path]):
        if rec is not None and "step" in rec:
            by_key[(rec.get("kind", "train"), rec["step"], rec.get("rank"))] = rec
    return sorted(by_key.values(), key=lambda r: (r["step"], r.get("kind", "train")))
