"""How often to checkpoint: the interval that minimises the expected time lost to failures and to saving.

Young (1974), refined by Daly (2006): with a blocking save time ``d`` and a mean time between failures of
the whole job ``M`` (a job of N GPUs fails N times as often as one GPU: ``M = MTBF per GPU / N``), saving
every ``t`` loses ``d / t`` of the time to saving and, per failure, on average half an interval of work, so
``t / (2 M)`` to failures; the sum is smallest at ``t = sqrt(2 d M)``, where it is ``sqrt(2 d / M)``. The
first-order formula holds while ``d`` is small against ``M``; the time to restart and reload is left out.

The save time is measured (the ``blocking_s`` of a run's ``kind: checkpoint`` records) or estimated: the
checkpoint (fp32 weights and AdamW's two moments, 12 bytes per parameter) written at a stated aggregate
bandwidth; an asynchronous save blocks only for its copy to host memory (each GPU its shard, over PCIe).
"""

from __future__ import annotations

import math
import os
import statistics

from dataprep.core.errors import UsageError

CHECKPOINT_BYTES_PER_PARAM = 12  # fp32 weights + AdamW's exp_avg and exp_avg_sq
WRITE_GBS_PER_NODE = 2.0  # GB/s a node writes to shared storage (a parallel file system client)
HOST_COPY_GBS_PER_GPU = 25.0  # GB/s device to host per GPU (PCIe Gen5 x16, about half its peak)


def estimated_save_seconds(
    params: int, gpus: int, gpus_per_node: int, async_save: bool = False, write_gbs_per_node: float = WRITE_GBS_PER_NODE
) -> float:
    """The blocking part of one save, estimated: the checkpoint over the nodes' write bandwidth, or (async)
    each GPU's shard copied to host memory."""
    size = params * CHECKPOINT_BYTES_PER_PARAM
    if async_save:
        return size / gpus / (HOST_COPY_GBS_PER_GPU * 1e9)
    nodes = math.ceil(gpus / gpus_per_node)
    return size / (nodes * write_gbs_per_node * 1e9)


def measured_save_seconds(run_dir: str) -> float:
    """The median blocking time of the saves a run logged (``kind: checkpoint`` in its metrics)."""
    from pretrain.components.metrics import read_metrics

    path = os.path.join(run_dir, "metrics.jsonl") if os.path.isdir(run_dir) else run_dir
    if not os.path.isfile(path):
        raise UsageError(f"--save-from {run_dir}: no metrics.jsonl there; give a run folder or its metrics file")
    times = [r["blocking_s"] for r in read_metrics(path) if r.get("kind") == "checkpoint"]
    if not times:
        raise UsageError(f"--save-from {run_dir}: the run logged no checkpoint saves; give --save-seconds instead")
    return statistics.median(times)


def checkpoint_interval(save_seconds: float, mtbf_hours_per_gpu: float, gpus: int, step_seconds: float) -> dict:
    """Young/Daly's interval for a job of ``gpus`` GPUs, in seconds and whole steps (at least one), and the
    expected fraction of time lost (saving plus the work redone after failures) at that whole number of
    steps."""
    if not (save_seconds > 0 and mtbf_hours_per_gpu > 0 and gpus > 0 and step_seconds > 0):
        raise UsageError("--mtbf-hours, the save time, the GPU count and the step time must be positive")
    mtbf_job = mtbf_hours_per_gpu * 3600 / gpus
    optimum = math.sqrt(2 * save_seconds * mtbf_job)
    steps = max(1, round(optimum / step_seconds))
    interval = steps * step_seconds
    return {
        "every_steps": steps,
        "interval_s": interval,
        "optimum_s": optimum,
        "save_s": save_seconds,
        "mtbf_job_s": mtbf_job,
        "mtbf_hours_per_gpu": mtbf_hours_per_gpu,
        "lost_fraction": save_seconds / interval + interval / (2 * mtbf_job),
    }


def plan_checkpoint_interval(
    result: dict,
    mtbf_hours: float,
    *,
    save_seconds: float | None = None,
    save_from: str | None = None,
    async_save: bool = False,
    write_gbs_per_node: float = WRITE_GBS_PER_NODE,
) -> dict:
    """Young/Daly's checkpoint interval for a planned job (``pretrain.planning.plan.plan``'s result): the save
    time given, measured by a run, or estimated from the checkpoint size; in the planned step time."""
    if save_seconds is not None and save_from:
        raise UsageError("--save-seconds and --save-from both give the save time: pass one")
    if not write_gbs_per_node > 0:
        raise UsageError("--write-gbs-per-node must be positive")
    gpus = result["cluster"]["gpus"]
    if save_seconds is not None:
        save, source = save_seconds, "given"
    elif save_from:
        save, source = measured_save_seconds(save_from), f"measured in {save_from}"
    else:
        save = estimated_save_seconds(
            result["model"]["params"], gpus, result["cluster"]["gpus_per_node"], async_save, write_gbs_per_node
        )
        source = (
            "estimated: each GPU's shard copied to host memory (async save)"
            if async_save
            else f"estimated: {result['model']['params'] * 12 / 1e9:.0f} GB at {write_gbs_per_node:g} GB/s per node"
        )
    interval = checkpoint_interval(save, mtbf_hours, gpus, result["time"]["step_seconds"])
    return interval | {"save_from": source, "async_save": async_save}
