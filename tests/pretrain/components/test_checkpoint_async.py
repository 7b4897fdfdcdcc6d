"""Asynchronous checkpoints (``checkpoint.async_save``): a run saved in the background resumes exactly as
one saved synchronously; a save cut short (a process killed while writing, or a folder left without the
files a save writes last) is passed over and the previous checkpoint is used."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

from pretrain.components import checkpoint, checkpoint_folder
from pretrain.components.metrics import read_metrics
from pretrain.config.loading import load_train_config
from pretrain.train import run
from train_fixtures import make_token_dataset, tiny_config

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_token_dataset(tmp_path_factory.mktemp("tokens"), n_docs=200)


def _config(data, out, async_save: bool) -> dict:
    return tiny_config(data, out, checkpoint={"every_steps": 2, "keep_last": 3, "async_save": async_save})


@pytest.fixture(scope="module")
def sync_run(data, tmp_path_factory):
    """Six steps saved synchronously at steps 2, 4 and 6: the reference."""
    out = tmp_path_factory.mktemp("sync")
    torch.set_num_threads(1)
    run(load_train_config(_config(data, out, False)))
    return out


def _losses(out_dir) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in read_metrics(os.path.join(out_dir, "metrics.jsonl")) if r["kind"] == "train"}


def test_async_saves_resume_bit_exactly_as_sync_ones(data, sync_run, tmp_path):
    cfg = load_train_config(_config(data, tmp_path, True))
    run(cfg, stop_at=4)
    assert [os.path.basename(p) for p in checkpoint_folder.list_checkpoints(tmp_path / "checkpoints")] == [
        "step-00000002",
        "step-00000004",
    ]
    got, _ = checkpoint.read_model_weights(str(tmp_path / "checkpoints" / "step-00000004"))
    want, _ = checkpoint.read_model_weights(str(sync_run / "checkpoints" / "step-00000004"))
    assert all(torch.equal(got[k], want[k]) for k in want)  # the weights of step 4, not of a later step
    run(cfg, resume="auto")
    assert _losses(tmp_path) == _losses(sync_run)


def test_a_save_left_incomplete_is_passed_over_for_the_previous_one(data, sync_run, tmp_path):
    shutil.copytree(sync_run / "checkpoints", tmp_path / "checkpoints")
    root = tmp_path / "checkpoints"
    shutil.rmtree(root / "step-00000006")
    # a save of step 6 cut short: its temporary folder, and a step folder lacking the train state
    shutil.copytree(
        root / "step-00000004", root / ".tmp-step-00000006", ignore=shutil.ignore_patterns("train_state.json")
    )
    shutil.copytree(root / ".tmp-step-00000006", root / "step-00000006")
    with pytest.warns(UserWarning, match="passed over incomplete checkpoint.s. step-00000006"):
        assert checkpoint_folder.resolve("auto", str(root)).endswith("step-00000004")
    assert checkpoint_folder.latest_before(str(root), 6).endswith("step-00000004")
    run(load_train_config(_config(data, tmp_path, True)), resume="auto")
    assert {s: v for s, v in _losses(tmp_path).items() if s > 4} == {5: _losses(sync_run)[5], 6: _losses(sync_run)[6]}
    assert checkpoint_folder.is_complete(str(root / "step-00000006"))  # written again, whole


def test_a_process_killed_during_an_async_save_resumes_from_a_complete_checkpoint(data, sync_run, tmp_path):
    import yaml

    (tmp_path / "train.yaml").write_text(yaml.safe_dump(_config(data, tmp_path / "run", True)))
    script = textwrap.dedent(f"""
        import os, signal, torch
        torch.set_num_threads(1)
        from pretrain.config.loading import load_train_config
        from pretrain.train import Trainer
        trainer = Trainer(load_train_config({str(tmp_path / "train.yaml")!r}))
        trainer.resume(None)
        trainer.start_logging()
        trainer.train(end=4)  # the save of step 4 starts; the process dies while it may be writing
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    found = checkpoint_folder.list_checkpoints(str(tmp_path / "run" / "checkpoints"))
    assert found and all(checkpoint_folder.is_complete(p) for p in found)  # step 2 at least; step 4 if it was committed
    run(load_train_config(str(tmp_path / "train.yaml")), resume="auto")
    assert _losses(tmp_path / "run") == _losses(sync_run)
