"""No host sync on ordinary steps: a step that neither logs, validates, checkpoints nor samples stragglers
reads nothing back from the device, with the non-finite guard and the spike detector both on, even when the
guard skips that step. The tensor methods that read a value back are instrumented for the run; they are
seen on the logging steps, so the instrument is shown to work. (On a CPU a read back costs little: this
test, not a timing, is the proof.)"""

from __future__ import annotations

import os

import pytest
import torch

from host_reads import reads_recorded
from pretrain.components.faults import Fault
from pretrain.components.metrics import read_metrics
from pretrain.config.loading import load_train_config
from pretrain.train import Trainer
from train_fixtures import make_token_dataset, tiny_config

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_the_guard_skips_steps_without_reading_back_ordinary_ones(tmp_path):
    data = make_token_dataset(tmp_path / "tokens", n_docs=200)
    cfg = load_train_config(
        tiny_config(
            data,
            tmp_path / "run",
            max_steps=8,
            log={"every_steps": 4, "val_every_steps": 100, "val_batches": 1},
            checkpoint={"every_steps": 100, "keep_last": 1},
            health={"straggler_every_steps": 0},
            spikes={"window": 3, "policy": "skip"},
        )
    )
    assert cfg.guard  # on by default
    trainer = Trainer(cfg, (Fault("nan", 2),))  # the guard skips ordinary step 2
    trainer.resume(None)
    trainer.start_logging()
    where = [None]
    step = trainer._step

    def located_step():
        where[0] = ("step", trainer.state.step + 1)
        outcome = step()
        where[0] = ("after", trainer.state.step + 1)  # the loop's work after the step, until the next one
        return outcome

    trainer._step = located_step
    with reads_recorded(where) as calls:
        trainer.train(end=8)
    trainer.finish()
    steps_read = sorted({step for (_, step), _ in calls if step is not None})
    assert steps_read == [4, 8], calls  # logging steps only (8 also validates and checkpoints)
    assert {name for _, name in calls} >= {"item", "cpu"}
    skips = [r for r in read_metrics(os.path.join(cfg.out_dir, "metrics.jsonl")) if r["kind"] == "skip"]
    assert [(r["step"], r["cause"]) for r in skips] == [(2, "loss+grad_norm")]  # read back at step 4
    assert all(int(v["step"]) == 7 for v in trainer.optimizer.state.values())  # 8 steps, one skipped
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())


def test_without_the_guard_a_non_finite_step_updates(tmp_path):
    data = make_token_dataset(tmp_path / "tokens", n_docs=200)
    cfg = load_train_config(tiny_config(data, tmp_path / "run", guard=False, spikes={"policy": "off"}))
    trainer = Trainer(cfg, (Fault("nan", 2),))
    trainer.resume(None)
    trainer.start_logging()
    trainer.train(end=2)
    trainer.finish()
    assert all(int(v["step"]) == 2 for v in trainer.optimizer.state.values())  # no step held back
    assert not all(torch.isfinite(p).all() for p in trainer.model.parameters())  # what the guard prevents
    assert not [r for r in read_metrics(os.path.join(cfg.out_dir, "metrics.jsonl")) if r["kind"] == "skip"]
