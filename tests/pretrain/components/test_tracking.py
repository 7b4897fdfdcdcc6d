"""Experiment tracking: TensorBoard and Weights & Biases (offline) receive ``train/``, ``val/`` and
``diagnostics/`` tags;
a configured tracker whose package is missing stops ``pretrain train`` before any set-up."""

from __future__ import annotations

import glob
import os

import pytest
import yaml
from train_fixtures import make_token_dataset, tiny_config

from pretrain.components import metrics
from pretrain.cli import main as pretrain_main

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_tensorboard_and_wandb_get_prefixed_tags(tmp_path, monkeypatch):
    pytest.importorskip("tensorboard")
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_SILENT", "true")
    data = make_token_dataset(tmp_path / "tokens", n_docs=40)
    cfg = tiny_config(data, tmp_path / "run", max_steps=4, log={"every_steps": 1, "val_every_steps": 2,
                      "diagnostics_every_steps": 2,
                      "tensorboard": "tb", "wandb": {"project": "ccp-test", "mode": "offline"}})
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert pretrain_main(["train", str(path)]) == 0

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "run" / "tb"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train/loss", "train/lr", "train/grad_norm", "train/tokens_per_s", "val/loss"} <= tags, tags
    assert [e.step for e in events.Scalars("train/loss")] == [1, 2, 3, 4]
    assert [e.step for e in events.Scalars("val/loss")] == [2, 4]
    assert [e.step for e in events.Scalars("diagnostics/grad_norm/block.1")] == [2, 4]
    assert {"diagnostics/update_ratio/head", "diagnostics/attn_logit_max/block.0"} <= tags, tags
    runs = glob.glob(str(tmp_path / "run" / "wandb" / "offline-run-*" / "run-*.wandb"))
    assert len(runs) == 1 and os.path.getsize(runs[0]) > 0


def test_missing_tracker_package_fails_before_set_up(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(metrics.TRACKER_PACKAGES, "tensorboard", "no_such_tensorboard_package")
    cfg = tiny_config(str(tmp_path / "no-data"), tmp_path / "run", log={"tensorboard": "tb"})
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert pretrain_main(["train", str(path)]) == 2
    err = capsys.readouterr().err
    assert "log.tensorboard is set but the 'no_such_tensorboard_package' package is not installed" in err
    assert not (tmp_path / "run").exists()  # nothing was set up (the data does not even exist)
    assert metrics.tracker_scalars({"kind": "val", "step": 3, "val_loss": 2.5}) == {"val/loss": 2.5}
