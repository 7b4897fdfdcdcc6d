"""qk_norm and the z-loss under FSDP x TP (2 x 2 gloo processes on CPU, one torchrun launch of
``pretrain.train``) train exactly like one process: the loss and the z-loss of every step within 1e-5."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from parallel_runs import MODEL, STEPS, run_single_process, torchrun
from train_fixtures import make_token_dataset, tiny_config

pytestmark = pytest.mark.slow  # many processes or subprocess CLIs: scripts/test.sh --fast leaves it out


def _config(data, out, parallel: dict) -> dict:
    return tiny_config(
        data,
        out,
        model={**MODEL, "qk_norm": True, "z_loss": 1e-3},
        max_steps=STEPS,
        parallel=parallel,
        log={"every_steps": 1, "val_every_steps": 3, "val_batches": 1},
        checkpoint={"every_steps": STEPS},
    )


def _train_records(out_dir) -> dict[int, tuple[float, float]]:
    with open(os.path.join(out_dir, "metrics.jsonl")) as fh:
        rows = [json.loads(line) for line in fh]
    return {r["step"]: (r["loss"], r["z_loss"]) for r in rows if r["kind"] == "train"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("stability_parallel")
    data = make_token_dataset(root / "tokens", n_docs=200)
    run_single_process(_config(data, root / "single", {}))
    cfg_path = root / "2x2.yaml"
    cfg_path.write_text(yaml.safe_dump(_config(data, root / "2x2", {"dp_shard": 2, "tp": 2})))
    torchrun(["-m", "pretrain.train", str(cfg_path)])
    return root


def test_qk_norm_and_z_loss_under_fsdp_x_tp_match_one_process(runs):
    ref, got = _train_records(runs / "single"), _train_records(runs / "2x2")
    assert sorted(got) == sorted(ref) and len(ref) == STEPS
    for step, (loss, z) in ref.items():
        assert got[step][0] == pytest.approx(loss, rel=1e-5) and got[step][1] == pytest.approx(z, rel=1e-5), step
    assert all(z > 0 for _, z in ref.values())
