"""The training loop in one process: schedule, learning, exact resume after a kill, checkpoint errors,
export, metrics and plots."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch
import yaml

from pretrain.cli import main as pretrain_main
from pretrain.components import checkpoint_folder
from pretrain.components.metrics import read_metrics
from pretrain.components.optimizer import lr_factor
from pretrain.components.safetensors_export import export_checkpoint
from pretrain.config.loading import load_train_config
from pretrain.config.optim import OptimConfig
from pretrain.train import run
from train_fixtures import make_token_dataset, tiny_config


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_token_dataset(tmp_path_factory.mktemp("tokens"), n_docs=200)


@pytest.fixture(autouse=True)
def one_thread():
    """Same thread count in-process and in subprocesses, so results are bitwise comparable."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _losses(out_dir) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in read_metrics(os.path.join(out_dir, "metrics.jsonl")) if r["kind"] == "train"}


@pytest.fixture(scope="module")
def finished_run(data, tmp_path_factory):
    """A 6-step run with checkpoints at steps 3 and 6 (shared by the checkpoint tests; do not modify)."""
    out = tmp_path_factory.mktemp("run")
    torch.set_num_threads(1)
    records = run(load_train_config(tiny_config(data, out)))
    return out, records


def test_lr_schedules():
    cos = OptimConfig(lr=1.0, warmup_steps=10, min_lr_ratio=0.1, schedule="cosine")
    assert [lr_factor(s, 100, cos) for s in (0, 9)] == [0.1, 1.0]
    assert lr_factor(55, 100, cos) == pytest.approx(0.55)
    assert lr_factor(100, 100, cos) == pytest.approx(0.1) and lr_factor(500, 100, cos) == pytest.approx(0.1)
    wsd = OptimConfig(warmup_steps=10, min_lr_ratio=0.0, schedule="wsd", decay_fraction=0.2)
    assert lr_factor(79, 100, wsd) == 1.0
    assert lr_factor(89, 100, wsd) == pytest.approx(0.5)
    assert lr_factor(99, 100, wsd) == pytest.approx(0.0)
    assert lr_factor(50, 100, OptimConfig(warmup_steps=10, schedule="constant")) == 1.0


def test_a_run_logs_its_metrics(finished_run):
    out, records = finished_run
    assert [r["step"] for r in records] == list(range(1, 7))
    for key in ("loss", "lr", "grad_norm", "tokens_per_s", "step_time_s", "tokens", "rss_gib"):
        assert key in records[0]
    assert records[-1]["tokens"] == 6 * 8 * 16
    vals = [r for r in read_metrics(os.path.join(out, "metrics.jsonl")) if r["kind"] == "val"]
    assert [v["step"] for v in vals] == [3, 6]


def test_a_run_saves_its_checkpoints_without_leftovers(finished_run):
    out, _ = finished_run
    ckpts = checkpoint_folder.list_checkpoints(os.path.join(out, "checkpoints"))
    assert [os.path.basename(c) for c in ckpts] == ["step-00000003", "step-00000006"]
    assert not [n for n in os.listdir(os.path.join(out, "checkpoints")) if n.startswith(".tmp")]


def test_a_runs_export_equals_the_offline_conversion_of_its_last_checkpoint(finished_run):
    from safetensors.torch import load_file

    out, _ = finished_run
    ckpts = checkpoint_folder.list_checkpoints(os.path.join(out, "checkpoints"))
    live = load_file(os.path.join(out, "model.safetensors"))
    offline = export_checkpoint(ckpts[-1], str(out / "offline.safetensors"))
    assert set(live) == set(offline) and "layers.0.attention.wq.weight" in live
    for name in live:
        torch.testing.assert_close(live[name], offline[name], rtol=0, atol=0)


def test_a_run_plots_its_curves(finished_run):
    out, _ = finished_run
    png = out / "curves.png"
    assert pretrain_main(["plot", str(out), "-o", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_progress_lines_give_an_eta_with_one_warning_of_a_step_time_far_from_the_plan(data, tmp_path, capsys):
    planned = {"global_batch_size": 8, "law_lr": 3e-3, "step_seconds": 1e-6}  # a plan no CPU can keep
    records = run(load_train_config(tiny_config(data, tmp_path / "run", max_steps=4, planned=planned)))
    for r in records:  # the steps left at the recent step time
        assert r["eta_s"] == pytest.approx((4 - r["step"]) * r["step_time_s"])
    err = capsys.readouterr().err
    assert len([line for line in err.splitlines() if " | eta " in line]) == 4
    assert err.count("x the plan's 1e-06 s") == 1


def test_model_learns(data, tmp_path):
    cfg = tiny_config(
        data,
        tmp_path,
        max_steps=30,
        optim={"lr": 1e-2, "warmup_steps": 3},
        log={"every_steps": 5, "val_every_steps": 30},
        checkpoint={"every_steps": 30},
    )
    records = run(load_train_config(cfg))
    assert records[-1]["loss"] < records[0]["loss"] - 0.5  # bigram data: far below the uniform 4.85


def test_gradient_accumulation_matches_one_big_batch(data, tmp_path):
    base = dict(max_steps=3, log={"every_steps": 1, "val_every_steps": 100}, checkpoint={"every_steps": 100})
    accum = run(load_train_config(tiny_config(data, tmp_path / "a", micro_batch_size=2, **base)))
    whole = run(load_train_config(tiny_config(data, tmp_path / "b", micro_batch_size=8, **base)))
    for x, y in zip(accum, whole):
        assert x["loss"] == pytest.approx(y["loss"], rel=1e-5)


def test_killed_run_resumes_with_identical_losses(data, tmp_path, finished_run):
    steps = 16
    overrides = dict(
        max_steps=steps, checkpoint={"every_steps": 4, "keep_last": 2}, log={"every_steps": 1, "val_every_steps": 1000}
    )
    reference = run(load_train_config(tiny_config(data, tmp_path / "ref", **overrides)))
    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump(tiny_config(data, tmp_path / "killed", **overrides)))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "pretrain.train", str(config), "--resume", "auto"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    first = tmp_path / "killed" / "checkpoints" / "step-00000004"
    deadline = time.time() + 120
    while not first.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
    logged = _losses(tmp_path / "killed")
    assert 4 <= max(logged) < steps  # it died mid-run
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    resumed = _losses(tmp_path / "killed")
    assert [resumed[s] for s in range(1, steps + 1)] == [r["loss"] for r in reference]  # bitwise


def _copy_ckpt(finished_run, tmp_path) -> str:
    out, _ = finished_run
    dst = tmp_path / "ckpt"
    shutil.copytree(os.path.join(out, "checkpoints", "step-00000003"), dst)
    return str(dst)


def _resume_from(data, tmp_path, ckpt, **overrides):
    return run(load_train_config(tiny_config(data, tmp_path / "resumed", **overrides)), resume=ckpt)


def test_missing_checkpoint_is_a_clear_error(data, tmp_path):
    with pytest.raises(checkpoint_folder.CheckpointError, match="does not exist"):
        _resume_from(data, tmp_path, str(tmp_path / "no-such-checkpoint"))
    config = tmp_path / "t.yaml"
    config.write_text(yaml.safe_dump(tiny_config(data, tmp_path / "cli")))
    assert pretrain_main(["train", str(config), "--resume", str(tmp_path / "nope")]) == 2  # one line, no traceback


@pytest.mark.parametrize("damage", ["truncate_data", "garbage_metadata", "no_state", "bad_state"])
def test_corrupt_checkpoint_is_a_clear_error(data, tmp_path, finished_run, damage):
    ckpt = _copy_ckpt(finished_run, tmp_path)
    if damage == "truncate_data":
        path = os.path.join(ckpt, "__0_0.distcp")
        with open(path, "r+b") as fh:
            fh.truncate(os.path.getsize(path) // 2)
    elif damage == "garbage_metadata":
        with open(os.path.join(ckpt, ".metadata"), "wb") as fh:
            fh.write(b"\x00not a pickle")
    elif damage == "no_state":
        os.remove(os.path.join(ckpt, checkpoint_folder.STATE_FILE))
    else:
        with open(os.path.join(ckpt, checkpoint_folder.STATE_FILE), "w") as fh:
            fh.write("{trunc")
    with pytest.raises(checkpoint_folder.CheckpointError, match=os.path.basename(ckpt)):
        _resume_from(data, tmp_path, ckpt)


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


def test_checkpoint_metadata_is_not_unpickled_freely(data, tmp_path, finished_run, monkeypatch):
    ckpt = _copy_ckpt(finished_run, tmp_path)
    with open(os.path.join(ckpt, ".metadata"), "wb") as fh:
        pickle.dump(_Evil(), fh)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(checkpoint_folder.CheckpointError, match="refusing to load posix.system"):
        _resume_from(data, tmp_path, ckpt)
    assert not (tmp_path / "pwned").exists()


def test_resume_refuses_another_model(data, tmp_path, finished_run):
    ckpt = _copy_ckpt(finished_run, tmp_path)
    bigger = tiny_config(data, tmp_path / "x")["model"] | {"ffn_dim": 96}
    with pytest.raises(checkpoint_folder.CheckpointError):
        _resume_from(data, tmp_path, ckpt, model=bigger)


def test_a_fresh_start_refuses_a_folder_of_old_checkpoints(data, finished_run):
    out, _ = finished_run
    with pytest.raises(ValueError, match="already holds checkpoints"):
        run(load_train_config(tiny_config(data, out)))


def test_resume_auto_continues_a_finished_run_to_a_longer_horizon(data, tmp_path, finished_run):
    out, records = finished_run
    shutil.copytree(out, tmp_path / "run")
    cfg = load_train_config(tiny_config(data, tmp_path / "run", max_steps=8))
    more = run(cfg, resume="auto")
    assert [r["step"] for r in more] == [7, 8]
    state = json.loads((tmp_path / "run" / "checkpoints" / "step-00000008" / checkpoint_folder.STATE_FILE).read_text())
    assert state["loader"] == {"samples_consumed": 64}


@pytest.fixture(scope="module")
def two_step_losses(data, tmp_path_factory):
    """The losses of two steps under some overrides; the fp32 reference is computed once for the module."""
    root = tmp_path_factory.mktemp("two-steps")
    base = dict(max_steps=2, log={"every_steps": 1, "val_every_steps": 100}, checkpoint={"every_steps": 100})

    def losses(name, **over):
        return [r["loss"] for r in run(load_train_config(tiny_config(data, root / name, **base, **over)))]

    reference = losses("fp32")
    return reference, losses


def test_activation_checkpointing_changes_no_number(two_step_losses):
    """Recomputation changes no number."""
    ref, losses = two_step_losses
    for mode in ("block", "selective"):
        assert losses(mode, parallel={"activation_checkpointing": mode}) == ref


def test_half_precisions_stay_close_to_fp32(two_step_losses):
    """bf16 autocast and fp16 with a GradScaler stay close to fp32."""
    ref, losses = two_step_losses
    for precision in ("bf16", "fp16"):
        assert losses(precision, precision=precision) == pytest.approx(ref, rel=1e-2)


def test_fp16_on_cuda_keeps_attention_off_cudnn():
    """cuDNN's attention trained fp16 worse than flash attention on an H100 (docs/gpu.md): an fp16 CUDA
    context turns it off; other precisions and devices keep torch's choice. Runs without a GPU (flags only)."""
    from pretrain.components.device import configure_attention

    before = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        for precision, device in (("bf16", "cuda"), ("fp32", "cuda"), ("fp16", "cpu")):
            configure_attention(precision, torch.device(device))
            assert torch.backends.cuda.cudnn_sdp_enabled(), (precision, device)
        configure_attention("fp16", torch.device("cuda"))
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.flash_sdp_enabled()  # torch falls back to flash attention
    finally:
        torch.backends.cuda.enable_cudnn_sdp(before)
