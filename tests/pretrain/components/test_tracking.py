"""Experiment tracking: TensorBoard and Weights & Biases (offline) receive ``train/``, ``val/`` and
``diagnostics/`` tags;
a configured tracker whose package is missing stops ``pretrain train`` before any set-up."""

from __future__ import annotations

import glob
import json
import struct
from pathlib import Path

import pytest
import yaml

from pretrain.cli import main as pretrain_main
from pretrain.components import metrics
from train_fixtures import make_token_dataset, tiny_config

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _train_tiny(tmp_path, monkeypatch, **trackers) -> None:
    monkeypatch.setenv("WANDB_SILENT", "true")
    data = make_token_dataset(tmp_path / "tokens", n_docs=40)
    cfg = tiny_config(
        data,
        tmp_path / "run",
        max_steps=4,
        log={"every_steps": 1, "val_every_steps": 2, "diagnostics_every_steps": 2, **trackers},
    )
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(cfg))
    assert pretrain_main(["train", str(path)]) == 0


def test_tensorboard_gets_prefixed_tags(tmp_path, monkeypatch):
    pytest.importorskip("tensorboard")
    _train_tiny(tmp_path, monkeypatch, tensorboard="tb")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "run" / "tb"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train/loss", "train/lr", "train/grad_norm", "train/tokens_per_s", "val/loss"} <= tags, tags
    assert [e.step for e in events.Scalars("train/loss")] == [1, 2, 3, 4]
    assert [e.step for e in events.Scalars("val/loss")] == [2, 4]
    assert [e.step for e in events.Scalars("diagnostics/grad_norm/block.1")] == [2, 4]
    assert {"diagnostics/update_ratio/head", "diagnostics/attn_logit_max/block.0"} <= tags, tags


def wandb_history(path: str) -> list[dict]:
    """The history rows of an offline W&B run file: a LevelDB-style log (32 KiB blocks of chunks, each a
    7-byte header: checksum, length, type) of ``Record`` protobufs, after the file's 7-byte header."""
    from wandb.proto import wandb_internal_pb2

    data, pos, pending, rows = Path(path).read_bytes(), 7, b"", []
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:  # the block's tail is padding
            pos += 32768 - pos % 32768
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        pending += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a whole record, or the last chunk of one
            record = wandb_internal_pb2.Record.FromString(pending)
            pending = b""
            if record.HasField("history"):
                rows.append(
                    {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
                )
    return rows


def test_wandb_gets_prefixed_tags(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    _train_tiny(tmp_path, monkeypatch, wandb={"project": "ccp-test", "mode": "offline"})
    runs = glob.glob(str(tmp_path / "run" / "wandb" / "offline-run-*" / "run-*.wandb"))
    assert len(runs) == 1
    rows = wandb_history(runs[0])
    steps_with = lambda tag: [row["_step"] for row in rows if tag in row]  # noqa: E731
    assert steps_with("train/loss") == [1, 2, 3, 4]
    assert steps_with("val/loss") == [2, 4]
    assert steps_with("diagnostics/grad_norm/block.1") == [2, 4]
    assert all(isinstance(row["train/loss"], float) for row in rows if "train/loss" in row)


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
