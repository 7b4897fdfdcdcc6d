"""The parallel training tests' shared pieces: a tiny model config, the single-process reference run, a
torchrun launch of 4 gloo processes on CPU and the losses a run recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import torch

from train_fixtures import tiny_config

STEPS = 6
MODEL = {
    "vocab_size": 128,
    "d_model": 32,
    "n_layers": 2,
    "n_heads": 8,
    "n_kv_heads": 4,
    "ffn_dim": 64,
    "max_seq_len": 64,
}


def config(data, out, parallel: dict | None = None) -> dict:
    return tiny_config(
        data,
        out,
        model=MODEL,
        max_steps=STEPS,
        parallel=parallel or {},
        log={"every_steps": 1, "val_every_steps": 3, "val_batches": 1},
        checkpoint={"every_steps": 3, "keep_last": 2},
    )


def run_single_process(cfg: dict) -> None:
    """The reference run, on one thread like each torchrun worker (OMP_NUM_THREADS=1)."""
    from pretrain.config.loading import load_train_config
    from pretrain.train import run

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run(load_train_config(cfg))
    finally:
        torch.set_num_threads(threads)


def torchrun(args: list[str], timeout: int = 400, processes: int = 4) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CCP_DEBUG": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}", *args]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]


def metric_records(out_dir, kind: str) -> dict[int, float]:
    key = "loss" if kind == "train" else "val_loss"
    out = {}
    with open(os.path.join(out_dir, "metrics.jsonl")) as fh:
        for line in fh:
            rec = json.loads(line)
            if rec["kind"] == kind:
                out[rec["step"]] = rec[key]  # a resumed run's later record wins
    return out
