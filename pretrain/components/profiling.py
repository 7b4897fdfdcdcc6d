"""Where a step's time goes: ``log.profile_steps: [START, END]`` (or ``pretrain train --profile START:END``)
records those steps with ``torch.profiler`` on every rank, writes each rank's Chrome trace
(``OUT_DIR/profile/rank<R>.trace.json``: Perfetto, chrome://tracing and TensorBoard open it) and a summary
``OUT_DIR/profile/profile.json``, printed as a table when the window closes.

Each profiled step's time is split on one timeline, each instant going to the first of these that covers
it: data wait (the batch fetch), optimizer (``Optimizer.step`` and ``zero_grad``), compute (operators on the
CPU, kernels on a GPU), communication (collectives: gloo's threads on the CPU, NCCL kernels on a GPU) and
idle (nothing: Python, launch overhead, waiting on other ranks). Communication so counts only where it is
exposed (not hidden behind compute); ``collectives`` gives each kind's whole busy time. Off, the loop holds
no profiler at all.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import sys
import time

import torch
import torch.distributed as dist

from dataprep.core.storage import atomic_output, atomic_write_text, make_folder

PARTS = ("data_wait_s", "optimizer_s", "compute_s", "communication_s")  # the timeline's order of precedence
STEP_PREFIX = "train_step#"
DATA_WAIT = "data_wait"
TOP_OPS = 15
_KINDS = (
    ("allreduce", "all_reduce"),
    ("allgather", "all_gather"),
    ("reducescatter", "reduce_scatter"),
    ("alltoall", "all_to_all"),
    ("broadcast", "broadcast"),
    ("sendrecv", "send_recv"),
    ("send", "send_recv"),
    ("recv", "send_recv"),
    ("barrier", "barrier"),
    ("reduce", "reduce"),
    ("gather", "gather"),
    ("scatter", "scatter"),
)


def collective_kind(name: str) -> str | None:
    """``all_gather`` for 'gloo:all_gather' or 'ncclDevKernel_AllGather_RING_LL(...)'; None for other ops."""
    lower = name.lower()
    if not (lower.startswith("gloo:") or "nccl" in lower):
        return None
    flat = lower.replace("_", "")
    return next((kind for key, kind in _KINDS if key in flat), "other")


class StepProfiler:
    """Records steps ``start``..``end`` (inclusive) of this rank; ``step(n)`` wraps one step and hands back
    the wrapper its batch fetch goes through."""

    def __init__(self, out_dir: str, start: int, end: int, rank: int, world: int, device: torch.device):
        self.folder = os.path.join(out_dir, "profile")
        self.start, self.end, self.rank, self.world, self.device = start, end, rank, world, device
        self.measured: dict[int, float] = {}  # step -> host seconds, as a stopwatch around it says
        self._prof = None

    @contextlib.contextmanager
    def step(self, step: int):
        """Step ``step``, recorded when it lies in the window; yields what wraps the batch fetch."""
        if not self.start <= step <= self.end:
            yield _untimed
            return
        if self._prof is None:
            self._open()
        started = time.perf_counter()
        with torch.profiler.record_function(f"{STEP_PREFIX}{step}"):
            yield _timed
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)  # the step's kernels end inside its range
        self.measured[step] = time.perf_counter() - started
        if step == self.end:
            self.close()

    def close(self) -> None:
        """Stop recording and write the traces and the summary (a collective); at the end of a job that ran
        no step of the window, say so."""
        if self._prof is not None:
            self._close()
        elif not self.measured and self.rank == 0:
            print(
                f"[profile] warning: no step of log.profile_steps [{self.start}, {self.end}] ran in this job "
                "(the run ended, stopped or resumed outside it): nothing was recorded",
                file=sys.stderr,
                flush=True,
            )

    def _open(self) -> None:
        activities = [torch.profiler.ProfilerActivity.CPU]
        if self.device.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self._prof = torch.profiler.profile(
            activities=activities, record_shapes=True, profile_memory=True, with_stack=False
        )
        self._prof.__enter__()

    def _close(self) -> None:
        prof, self._prof = self._prof, None
        prof.__exit__(None, None, None)
        make_folder(self.folder)
        with atomic_output(os.path.join(self.folder, f"rank{self.rank}.trace.json"), suffix=".json") as tmp:
            prof.export_chrome_trace(tmp)
        if not self.measured:
            return
        summary = {
            "rank": self.rank,
            "steps": split_steps(prof.events(), self.measured),
            "top_ops": top_ops(prof, self.device.type == "cuda"),
        }
        ranks = [summary]
        if self.world > 1:
            ranks = [None] * self.world
            dist.all_gather_object(ranks, summary)
        if self.rank == 0:
            report = profile_report(ranks, self.start, self.end, self.device.type)
            atomic_write_text(os.path.join(self.folder, "profile.json"), json.dumps(report, indent=2))
            print(format_profile(report, self.folder), file=sys.stderr, flush=True)


def profiled_step(profiler: StepProfiler | None, step: int):
    """The profiler's ``step`` context, or with no profiler one that costs nothing."""
    return profiler.step(step) if profiler is not None else contextlib.nullcontext(_untimed)


def _untimed(fetch):
    return fetch


def _timed(fetch):
    def timed():
        with torch.profiler.record_function(DATA_WAIT):
            return fetch()

    return timed


def _part(event, cuda: bool, comm_threads: set[int]) -> str | None:
    """The part of a step an event's time belongs to (None: none, such as the step's own range); operators
    on gloo's threads are the collectives' own work, not compute."""
    name = event.name
    if name == DATA_WAIT:
        return "data_wait_s"
    if name.startswith(("Optimizer.step#", "Optimizer.zero_grad#")):
        return "optimizer_s"
    on_device = event.device_type != torch.autograd.DeviceType.CPU
    if collective_kind(name):
        return "communication_s" if on_device or not cuda else None
    if cuda:
        return "compute_s" if on_device else None
    return "compute_s" if name.startswith("aten::") and event.thread not in comm_threads else None


def split_steps(events, measured: dict[int, float]) -> list[dict]:
    """Each profiled step's time split into data wait, optimizer, compute, exposed communication and idle
    (seconds), with each kind of collective's busy time and the stopwatch's step time beside it."""
    cuda = any(e.device_type != torch.autograd.DeviceType.CPU for e in events)
    comm_threads = {e.thread for e in events if e.name.startswith("gloo:")}
    windows = sorted(
        (int(e.name[len(STEP_PREFIX) :]), e.time_range.start, e.time_range.end)
        for e in events
        if e.name.startswith(STEP_PREFIX)
    )
    spans = [
        (e.time_range.start, e.time_range.end, part, collective_kind(e.name))
        for e in events
        if e.time_range.end > e.time_range.start and (part := _part(e, cuda, comm_threads))
    ]
    steps = []
    for step, lo, hi in windows:
        inside = [(max(a, lo), min(b, hi), part, kind) for a, b, part, kind in spans if a < hi and b > lo]
        split = _sweep(inside, lo, hi)
        kinds = {}
        for kind in sorted({k for *_, k in inside if k}):
            kinds[kind] = _union([(a, b) for a, b, _, k in inside if k == kind]) / 1e6
        steps.append(
            {
                "step": step,
                "step_s": (hi - lo) / 1e6,
                "measured_step_s": measured.get(step),
                **{part: split[part] / 1e6 for part in PARTS},
                "idle_s": split["idle_s"] / 1e6,
                "collectives": kinds,
            }
        )
    return steps


def _sweep(spans: list[tuple], lo: float, hi: float) -> dict[str, float]:
    """Microseconds of [lo, hi] per part, each instant going to the first part in ``PARTS`` covering it."""
    bounds = sorted({lo, hi, *(a for a, *_ in spans), *(b for _, b, *_ in spans)})
    events = sorted([(a, 1, part) for a, _, part, _ in spans] + [(b, -1, part) for _, b, part, _ in spans])
    open_parts = dict.fromkeys(PARTS, 0)
    totals = dict.fromkeys(PARTS + ("idle_s",), 0.0)
    i = 0
    for left, right in itertools.pairwise(bounds):
        while i < len(events) and events[i][0] <= left:
            open_parts[events[i][2]] += events[i][1]
            i += 1
        part = next((p for p in PARTS if open_parts[p] > 0), "idle_s")
        totals[part] += right - left
    return totals


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def top_ops(prof, cuda: bool) -> list[dict]:
    """The operators that took the most time of their own (excluding what they called) over the window."""
    key = "self_device_time_total" if cuda else "self_cpu_time_total"
    rows = [a for a in prof.key_averages() if not a.key.startswith((STEP_PREFIX, DATA_WAIT, "ProfilerStep"))]
    rows.sort(key=lambda a: getattr(a, key), reverse=True)
    return [
        {
            "name": a.key,
            "calls": a.count,
            "self_cpu_s": a.self_cpu_time_total / 1e6,
            **({"self_device_s": a.self_device_time_total / 1e6} if cuda else {}),
        }
        for a in rows[:TOP_OPS]
    ]


def _mean(rows: list[dict], key: str) -> float:
    values = [r[key] for r in rows if r.get(key) is not None]
    return sum(values) / len(values) if values else 0.0


def profile_report(ranks: list[dict], start: int, end: int, device: str) -> dict:
    """What ``profile.json`` holds: per rank, per step and the mean over the window; the mean over ranks;
    rank 0's top operators."""
    per_rank = []
    for r in ranks:
        steps = r["steps"]
        kinds = sorted({k for s in steps for k in s["collectives"]})
        mean = {key: _mean(steps, key) for key in ("step_s", "measured_step_s", *PARTS, "idle_s")}
        mean["collectives"] = {k: sum(s["collectives"].get(k, 0.0) for s in steps) / len(steps) for k in kinds}
        per_rank.append({"rank": r["rank"], "steps": steps, "mean": mean, "top_ops": r["top_ops"]})
    means = [r["mean"] for r in per_rank]
    overall = {key: _mean(means, key) for key in means[0] if key != "collectives"}
    kinds = sorted({k for m in means for k in m["collectives"]})
    overall["collectives"] = {k: sum(m["collectives"].get(k, 0.0) for m in means) / len(means) for k in kinds}
    return {
        "steps": [start, end],
        "ranks": len(per_rank),
        "device": device,
        "mean": overall,
        "top_ops": per_rank[0]["top_ops"],
        "per_rank": per_rank,
    }


def profile_split_line(mean: dict) -> str:
    """'0.412 s = compute 0.301 (73%) + ...': the mean step's split (the report reuses it)."""
    total = mean["step_s"] or 1e-12
    names = {
        "compute_s": "compute",
        "communication_s": "communication",
        "data_wait_s": "data wait",
        "optimizer_s": "optimizer",
        "idle_s": "idle",
    }
    return f"{mean['step_s']:.4f} s = " + " + ".join(
        f"{label} {mean[key]:.4f} ({mean[key] / total:.0%})" for key, label in names.items()
    )


def format_profile(report: dict, folder: str) -> str:
    mean, (start, end) = report["mean"], report["steps"]
    lines = [
        (
            f"[profile] steps {start}-{end} on {report['ranks']} rank(s), {report['device']}, mean per step over "
            f"ranks: {profile_split_line(mean)}; stopwatch {mean['measured_step_s']:.4f} s"
        )
    ]
    if mean["collectives"]:
        lines.append(
            "  collectives (busy time per step, hidden or not): "
            + ", ".join(f"{k} {v:.4f} s" for k, v in mean["collectives"].items())
        )
    lines.append(f"  {'top operators by self time (rank 0)':<60}{'calls':>8}{'self s':>10}")
    device = "self_device_s" in (report["top_ops"] or [{}])[0]
    for op in report["top_ops"][:10]:
        self_s = op["self_device_s"] if device else op["self_cpu_s"]
        name = re.sub(r"\s+", " ", op["name"])[:58]
        lines.append(f"  {name:<60}{op['calls']:>8}{self_s:>10.4f}")
    lines.append(
        f"  traces: {folder}/rank<R>.trace.json (open in https://ui.perfetto.dev or chrome://tracing); "
        f"summary: {folder}/profile.json"
    )
    return "\n".join(lines)
