"""configs/train/tiny_cpu.yaml as the README runs it after ``bash scripts/demo.sh``: it
reads the demo's shards, sizes the model's vocabulary to their tokenizer, holds out enough of a small corpus
to validate on, and ``pretrain eval`` on the run prints the validation loss."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from pretrain.cli import main as pretrain_main
from pretrain.components.metrics import read_metrics
from train_fixtures import make_token_dataset

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.usefixtures("one_torch_thread")
def test_tiny_cpu_config_runs_as_written_on_the_demos_shards(tmp_path, monkeypatch, capsys):
    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    shards = tmp_path / "out" / "demo" / "pipeline" / "shards"  # where the demo writes them
    shards.mkdir(parents=True)
    make_token_dataset(shards, n_docs=23, vocab=2000, min_len=150, max_len=600, n_shards=1)  # the demo's size
    monkeypatch.chdir(tmp_path)
    assert (
        pretrain_main(["train", "configs/train/tiny_cpu.yaml", "--optim.lr", "3e-4", "--set", "max_steps=50", "--json"])
        == 0
    )
    run = Path(json.loads(capsys.readouterr().out)["out_dir"])
    assert run == tmp_path / "runs" / "tiny_cpu"
    assert yaml.safe_load((run / "config.yaml").read_text())["model"]["vocab_size"] == 2000  # the data's
    val = [r for r in read_metrics(str(run / "metrics.jsonl")) if r["kind"] == "val"]
    assert [r["step"] for r in val] == [50]
    assert pretrain_main(["eval", "runs/tiny_cpu"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("loss ") and "validation split of the run" in out
    assert float(out.split()[1]) == pytest.approx(val[-1]["val_loss"], abs=1e-4)
