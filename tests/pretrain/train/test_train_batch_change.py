"""A global batch other than the one the learning rate was chosen for: the plan's (``planned:``, written by
``pretrain plan --out``) or a resumed run's (kept in its checkpoints). ``optim.batch_change: sqrt`` (the
default) scales the peak lr by sqrt(new / old) in the optimizer itself; ``warn`` keeps it; both write a
``kind: batch_change`` record."""

from __future__ import annotations

import math
import os

import pytest

from pretrain.cli import main as cli
from pretrain.components.metrics import read_metrics
from pretrain.components.optimizer import lr_factor
from pretrain.config.loading import load_train_config
from pretrain.train import Trainer
from train_fixtures import make_token_dataset, tiny_config

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LR = 3e-3  # tiny_config's


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_token_dataset(tmp_path_factory.mktemp("tokens"), n_docs=200)


def _train(cfg: dict, resume: str | None = None, end: int = 6) -> Trainer:
    trainer = Trainer(load_train_config(cfg))
    trainer.resume(resume)
    trainer.start_logging()
    trainer.train(end=end)
    trainer.finish()
    return trainer


def _records(out_dir, kind: str) -> list[dict]:
    return [r for r in read_metrics(os.path.join(out_dir, "metrics.jsonl")) if r["kind"] == kind]


def _optimizer_peak(trainer: Trainer) -> float:
    """The peak lr the optimizer's own rate implies at its current step."""
    step = trainer.scheduler.last_epoch
    return trainer.optimizer.param_groups[0]["lr"] / lr_factor(step, trainer.steps, trainer.cfg.optim)


def test_the_plans_config_records_the_planned_batch_beside_the_laws_lr(tmp_path, capsys):
    out = tmp_path / "train.yaml"
    assert cli(["plan", "125m", "--gpus", "2", "--lr", "1e-3", "--output", str(out), "--data", str(tmp_path)]) == 0
    cfg = load_train_config(str(out))
    assert cfg.planned.global_batch_size == cfg.global_batch_size and cfg.optim.lr == 1e-3
    assert cfg.planned.law_lr != 1e-3 and cfg.planned.law_lr > 0


def test_a_batch_other_than_the_plans_scales_the_lr_by_the_square_root(data, tmp_path):
    planned = {"global_batch_size": 4, "law_lr": LR}
    trainer = _train(tiny_config(data, tmp_path / "sqrt", planned=planned))  # global batch 8
    assert _optimizer_peak(trainer) == pytest.approx(LR * math.sqrt(2))
    [record] = _records(tmp_path / "sqrt", "batch_change")
    assert (record["against"], record["rule"], record["previous_global_batch_size"]) == ("plan", "sqrt", 4)
    first = _records(tmp_path / "sqrt", "train")[0]
    assert first["lr"] == pytest.approx(LR * math.sqrt(2) * lr_factor(0, 6, trainer.cfg.optim))

    warned = _train(tiny_config(data, tmp_path / "warn", planned=planned, optim={"lr": LR, "batch_change": "warn"}))
    assert _optimizer_peak(warned) == pytest.approx(LR)
    assert [(r["rule"], r["lr"]) for r in _records(tmp_path / "warn", "batch_change")] == [("warn", LR)]

    same = _train(tiny_config(data, tmp_path / "same", planned={"global_batch_size": 8, "law_lr": LR}), end=1)
    assert _records(tmp_path / "same", "batch_change") == [] and _optimizer_peak(same) == pytest.approx(LR)


def test_resuming_at_another_global_batch_rescales_from_the_checkpoints_lr(data, tmp_path):
    out = tmp_path / "run"
    _train(tiny_config(data, out), end=3)  # global batch 8, checkpoint at step 3
    bigger = tiny_config(data, out, global_batch_size=16)
    trainer = _train(bigger, resume="auto", end=4)
    assert _optimizer_peak(trainer) == pytest.approx(LR * math.sqrt(2))
    [record] = _records(out, "batch_change")
    assert (record["step"], record["against"], record["previous_global_batch_size"], record["global_batch_size"]) == (
        3,
        "checkpoint",
        8,
        16,
    )
    trainer = _train(bigger, resume="auto")  # the checkpoint at step 4 holds the new batch and rate
    assert len(_records(out, "batch_change")) == 1 and _optimizer_peak(trainer) == pytest.approx(LR * math.sqrt(2))
