"""checkpoint.keep_best and early_stop: the best checkpoint is kept and handed over, a run whose validation
loss stopped improving ends (and a resumed run remembers its best), and both need a validation split."""

from __future__ import annotations

import json
import os

import pytest
import torch
import yaml

from dataprep.core.validation import ConfigError
from pretrain.cli import main as pretrain_main
from pretrain.components import checkpoint_folder
from pretrain.components.metrics import read_metrics
from pretrain.config.loading import load_train_config
from pretrain.train import run
from train_fixtures import make_token_dataset, tiny_config


@pytest.fixture(autouse=True)
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _config(data, out, **overrides) -> dict:
    """Validation every 2 steps; min_delta so large that no validation counts as an improvement for
    early_stop, so the run stops at the third validation (step 6) whatever the losses."""
    return tiny_config(
        data,
        out,
        max_steps=40,
        checkpoint={"every_steps": 100, "keep_last": 1, "keep_best": True},
        log={"every_steps": 2, "val_every_steps": 2, "val_batches": 1},
        early_stop={"patience": 2, "min_delta": 100.0},
        **overrides,
    )


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory) -> tuple:
    """A run that stops early at step 6: its folder, the JSON ``pretrain train`` printed and its metrics."""
    import contextlib
    import io

    root = tmp_path_factory.mktemp("early-stop")
    data = make_token_dataset(root / "tokens", n_docs=60)
    out = root / "run"
    (root / "train.yaml").write_text(yaml.safe_dump(_config(data, out)))
    printed, before = io.StringIO(), torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with contextlib.redirect_stdout(printed):
            assert pretrain_main(["train", str(root / "train.yaml"), "--json"]) == 0
    finally:
        torch.set_num_threads(before)
    records = read_metrics(str(out / "metrics.jsonl"))
    val = {r["step"]: r["val_loss"] for r in records if r["kind"] == "val"}
    return out, json.loads(printed.getvalue()), records, val


def test_early_stop_ends_the_run_naming_its_best_step(stopped_run):
    out, result, records, val = stopped_run
    stop = [r for r in records if r["kind"] == "early_stop"]
    assert list(val) == [2, 4, 6] and len(stop) == 1 and stop[0]["step"] == 6
    best_step = min(val, key=val.get)
    assert stop[0]["best_step"] == best_step and stop[0]["best_val_loss"] == pytest.approx(val[best_step])
    assert result["early_stop"]["step"] == 6 and result["model"].endswith(f"step-{best_step:08d}")
    assert not (out / "model.safetensors").exists()  # the run did not reach its horizon


def test_early_stop_keeps_the_best_checkpoint_besides_the_last(stopped_run):
    out, _, _, val = stopped_run
    best_step = min(val, key=val.get)
    root = str(out / "checkpoints")
    kept = [checkpoint_folder.checkpoint_step(p) for p in checkpoint_folder.list_checkpoints(root)]
    assert kept == sorted({best_step, 6})  # keep_last 1, and the best besides
    assert checkpoint_folder.find_best(root) == os.path.join(root, f"step-{best_step:08d}")


def test_eval_of_an_early_stopped_run_takes_its_best_checkpoint(stopped_run, capsys):
    out, _, _, val = stopped_run
    best_step = min(val, key=val.get)
    assert pretrain_main(["eval", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    evaluated = json.loads(captured.out)
    assert evaluated["step"] == best_step and evaluated["loss"] == pytest.approx(val[best_step], abs=1e-4)
    assert f"best checkpoint, step {best_step}" in captured.err


def test_a_resumed_run_remembers_its_best(tmp_path):
    data = make_token_dataset(tmp_path / "tokens", n_docs=60)
    out = tmp_path / "run"
    cfg = load_train_config(_config(data, out))
    run(cfg, stop_at=4)
    records = run(cfg, resume="auto")
    assert records[-1]["kind"] == "early_stop" and records[-1]["step"] == 6  # as without the interruption
    val = {r["step"]: r["val_loss"] for r in read_metrics(str(out / "metrics.jsonl")) if r["kind"] == "val"}
    best_step = min(val, key=val.get)
    assert checkpoint_folder.find_best(str(out / "checkpoints")).endswith(f"step-{best_step:08d}")


@pytest.mark.parametrize("section", [{"checkpoint": {"keep_best": True}}, {"early_stop": {"patience": 3}}])
def test_keeping_the_best_or_stopping_early_needs_a_validation_split(tmp_path, section):
    cfg = tiny_config(
        str(tmp_path), tmp_path / "run", data={"sources": [{"path": str(tmp_path)}], "val_fraction": 0}, **section
    )
    with pytest.raises(ConfigError, match="need a validation split: set data.val_fraction above 0") as err:
        load_train_config(cfg)
    assert "\n" not in str(err.value)
