"""The profiler in the loop (``log.profile_steps``, ``pretrain train --profile``): the trace holds the chosen
steps only and names the model's matmuls; each step's split (compute, communication, data wait, optimizer,
idle) adds up to the stopwatch's step time; the report shows it; and a run without it holds no profiler."""

from __future__ import annotations

import json
import os

import pytest

from dataprep.core.validation import ConfigError
from pretrain.cli import main as pretrain_main
from pretrain.commands.train import profile_window
from pretrain.components.profiling import collective_kind
from pretrain.config.loading import load_train_config
from pretrain.train import Trainer, run
from profiles import check_split, profile_config, trace_names
from train_fixtures import make_token_dataset

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_the_profile_reports_the_chosen_steps(tmp_path, capsys):
    data = make_token_dataset(tmp_path / "tokens", n_docs=200)
    run(load_train_config(profile_config(data, tmp_path / "run", profile_steps=[2, 3])))
    folder = tmp_path / "run" / "profile"
    assert sorted(os.listdir(folder)) == ["profile.json", "rank0.trace.json"]
    names = trace_names(folder / "rank0.trace.json")
    assert {n for n in names if n.startswith("train_step#")} == {"train_step#2", "train_step#3"}
    assert {"aten::mm", "data_wait"} <= names and any(n.startswith("Optimizer.step#") for n in names)
    report = json.loads((folder / "profile.json").read_text())
    assert report["steps"] == [2, 3] and report["ranks"] == 1 and report["mean"]["communication_s"] == 0
    check_split(report, [2, 3])
    assert report["top_ops"][0]["self_cpu_s"] >= report["top_ops"][-1]["self_cpu_s"] > 0
    assert any(op["name"] == "aten::mm" for op in report["top_ops"])
    assert "[profile] steps 2-3 on 1 rank(s)" in capsys.readouterr().err

    from pretrain.inference.plot import training_section

    rows = dict(training_section(str(tmp_path / "run"), str(tmp_path)).tables[0][1])
    assert rows["profiled step (steps 2-3, mean of 1 rank(s))"].startswith(
        f"{report['mean']['step_s']:.4f} s = compute"
    )


def test_a_window_the_run_never_reaches_is_reported(tmp_path, capsys):
    data = make_token_dataset(tmp_path / "tokens", n_docs=200)
    run(load_train_config(profile_config(data, tmp_path / "run", profile_steps=[7, 8])))
    assert "no step of log.profile_steps [7, 8] ran" in capsys.readouterr().err
    assert not (tmp_path / "run" / "profile").exists()


def test_without_profile_steps_there_is_no_profiler(tmp_path):
    data = make_token_dataset(tmp_path / "tokens", n_docs=200)
    trainer = Trainer(load_train_config(profile_config(data, tmp_path / "run")))
    assert trainer.profiler is None
    with pytest.raises(ConfigError, match=r"profile_steps \[3, 2\]"):
        load_train_config(profile_config(data, tmp_path / "run", profile_steps=[3, 2]))


def test_profile_flag(tmp_path, capsys):
    assert profile_window("5:8") == [5, 8] and profile_window("5") == [5, 5]
    assert pretrain_main(["train", "missing.yaml", "--profile", "a:b"]) == 2
    assert "--profile a:b: expected START:END" in capsys.readouterr().err
    assert collective_kind("gloo:reduce_scatter") == "reduce_scatter"
    assert collective_kind("ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)") == "all_gather"
    assert collective_kind("aten::mm") is None
