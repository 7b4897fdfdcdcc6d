"""Per-layer diagnostics are the same under parallelism as in one process: 2 gloo processes on CPU under
torchrun (this file as the worker) run FSDP (2 shards), HSDP (2 replicas: each weight counted once), tensor
parallel (2 ranks: the norm gains are replicated and their gradients partial sums), context parallel (2
chunks of each sequence) and pipeline parallel (2 stages: each adds its own layers); every value of every
diagnostic step equals the single-process one within 1e-5. Two values are absent by design: context
parallelism has no attention logits (a rank holds chunks of q and k), and the pipeline's first step, which
runs a forward pass on placeholder tensors to infer the stages' shapes, no activations."""

from __future__ import annotations

import os
import sys

import pytest
import torch

from parallel_runs import MODEL, run_single_process, torchrun
from pretrain.components.metrics import read_metrics
from train_fixtures import make_token_dataset, tiny_config

pytestmark = pytest.mark.slow  # many processes or subprocess CLIs: scripts/test.sh --fast leaves it out

STEPS = 2
LAYOUTS = {"fsdp2": {"dp_shard": 2}, "hsdp2": {"dp_replicate": 2}, "tp2": {"tp": 2}, "cp2": {"cp": 2}, "pp2": {"pp": 2}}


def config(data, out, parallel: dict | None = None) -> dict:
    return tiny_config(
        data,
        out,
        model=MODEL,
        max_steps=STEPS,
        parallel=parallel or {},
        log={"every_steps": 1, "val_every_steps": 100, "val_batches": 1, "diagnostics_every_steps": 1},
        checkpoint={"every_steps": 100, "keep_last": 1},
    )


def _diagnostics(out_dir) -> dict[int, dict]:
    return {
        r["step"]: {k: v for k, v in r.items() if k not in ("kind", "step", "time")}
        for r in read_metrics(os.path.join(out_dir, "metrics.jsonl"))
        if r["kind"] == "diagnostics"
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("diagnostics_parallel")
    data = make_token_dataset(root / "tokens", n_docs=200)
    run_single_process(config(data, root / "single"))
    torchrun([os.path.abspath(__file__), str(root), data], processes=2)
    return root


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_parallel_diagnostics_equal_one_process(runs, layout):
    ref, got = _diagnostics(runs / "single"), _diagnostics(runs / layout)
    assert sorted(ref) == list(range(1, STEPS + 1)) and sorted(got) == sorted(ref)
    for step, values in ref.items():
        assert len(values) == 3 * 4 + 2 * 3 + 2  # norms of 4 layers, activations of 3, logits of 2 blocks
        if layout == "pp2" and step == 1:
            values = {k: v for k, v in values.items() if not k.startswith(("act_", "attn_"))}
        if layout == "cp2":
            values = {k: v for k, v in values.items() if not k.startswith("attn_")}
        assert set(got[step]) == set(values), (layout, step)
        for key, value in values.items():
            assert got[step][key] == pytest.approx(value, rel=1e-5), (layout, step, key)


def _worker(root: str, data: str) -> None:
    from pretrain.config.loading import load_train_config
    from pretrain.train import run

    for name, parallel in LAYOUTS.items():
        run(load_train_config(config(data, os.path.join(root, name), parallel)))
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    _worker(sys.argv[1], sys.argv[2])
