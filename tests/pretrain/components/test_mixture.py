"""Mixture presets in training configs, and the tokens drawn per source measured in the run's metrics."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import yaml

from pretrain.cli import main as pretrain_main
from pretrain.components.metrics import read_metrics, tracker_scalars
from pretrain.components.mixture_order import BLOCK, MixtureOrder
from pretrain.components.shard_totals import shard_totals
from pretrain.config.loading import load_train_config
from pretrain.inference.plot import training_section
from pretrain.mixture_presets import presets
from pretrain.planning.data_constrained import effective_tokens
from pretrain.train import run
from train_fixtures import make_token_dataset, tiny_config


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The two folders the web_wiki preset names, under a working directory of their own."""
    root = tmp_path_factory.mktemp("mix")
    make_token_dataset(root / "out/web/shards", n_docs=200, seed=1)
    make_token_dataset(root / "out/wikipedia/shards", n_docs=30, seed=2)  # small: repeated more
    return root


@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _mixture_config(out, **overrides) -> dict:
    cfg = tiny_config([], out, **overrides)
    cfg["data"] = {"mixture": "web_wiki", "val_fraction": 0.1}
    return cfg


def test_presets_ship_llama1_and_web_wiki():
    assert {"llama1", "web_wiki"} <= set(presets())


def test_mixture_by_name_becomes_the_sources(built, monkeypatch):
    monkeypatch.chdir(built)
    cfg = load_train_config(_mixture_config(built / "run"))
    assert [(s.name, s.path, s.weight) for s in cfg.data.sources] == [
        ("web", "out/web/shards", 0.7),
        ("wikipedia", "out/wikipedia/shards", 0.3),
    ]
    assert cfg.data.mixture == "web_wiki"


def test_a_source_not_built_is_refused_by_name_before_any_step(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    make_token_dataset(tmp_path / "out/web/shards", n_docs=20)  # wikipedia's shards are missing
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(_mixture_config(tmp_path / "run")))
    assert pretrain_main(["train", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "'wikipedia'" in err[0] and "out/wikipedia/shards" in err[0] and "dataprep run wikipedia" in err[0]
    assert not (tmp_path / "run").exists()


def test_mixture_and_sources_together_is_a_config_error(built):
    cfg = _mixture_config(built / "run")
    cfg["data"]["sources"] = [{"path": str(built / "out/web/shards")}]
    with pytest.raises(ValueError, match="data.mixture or data.sources"):
        load_train_config(cfg)


@pytest.mark.parametrize("start,end", [(0, 0), (0, 5), (3, 1500), (1000, 1030), (17, 5 * BLOCK + 9), (2048, 4096)])
def test_drawn_counts_equal_the_order_sample_by_sample(start, end):
    order = MixtureOrder([500, 90], [0.7, 0.3], seed=3)
    expected = np.bincount([order(p)[0] for p in range(start, end)], minlength=2)
    assert order.drawn(start, end).tolist() == expected.tolist()


def test_two_source_mixture_draws_tokens_within_2_percent_of_the_weights(built, monkeypatch, one_thread):
    """Web 0.7, Wikipedia 0.3 by tokens, 300 steps of the tiny model on CPU: the metrics say what was drawn."""
    monkeypatch.chdir(built)
    cfg = _mixture_config(
        built / "run", max_steps=300, log={"every_steps": 50, "val_every_steps": 1000}, checkpoint={"every_steps": 1000}
    )
    run(load_train_config(cfg))
    records = [r for r in read_metrics(str(built / "run/metrics.jsonl")) if r["kind"] == "train"]
    last = records[-1]
    assert last["step"] == 300
    assert sum(last["source_tokens"].values()) == 300 * 8 * 16  # steps x sequences x seq_len
    assert last["source_share"]["web"] == pytest.approx(0.7, abs=0.02)
    assert last["source_share"]["wikipedia"] == pytest.approx(0.3, abs=0.02)
    assert records[0]["source_tokens"]["web"] < last["source_tokens"]["web"]  # cumulative
    assert tracker_scalars(last)["train/source_share/web"] == last["source_share"]["web"]
    (table,) = training_section(str(built / "run"), str(built)).tables
    row = dict(table[1])["tokens per source"]
    assert row == (
        f"web {last['source_tokens']['web']:,} ({last['source_share']['web']:.1%}), "
        f"wikipedia {last['source_tokens']['wikipedia']:,} ({last['source_share']['wikipedia']:.1%})"
    )


def _budget(capsys, *args) -> dict:
    assert pretrain_main(["budget", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_budget_on_a_mixture_gives_each_source_its_epochs(built, monkeypatch, capsys):
    monkeypatch.chdir(built)
    web, wiki = (shard_totals([f"out/{name}/shards"])["tokens"] for name in ("web", "wikipedia"))
    rows = {r["name"]: r for r in _budget(capsys, "--data", "web_wiki", "--tokens", str(4 * web))["mixture"]}
    assert rows["web"]["tokens"] == pytest.approx(0.7 * 4 * web)
    assert rows["web"]["epochs"] == pytest.approx(0.7 * 4)
    assert rows["wikipedia"]["epochs"] == pytest.approx(0.3 * 4 * web / wiki)
    assert rows["wikipedia"]["effective_tokens"] == pytest.approx(effective_tokens(rows["wikipedia"]["tokens"], wiki))


def test_budget_on_a_mixture_warns_of_each_source_repeated_past_four_epochs(built, monkeypatch, capsys):
    monkeypatch.chdir(built)
    web, wiki = (shard_totals([f"out/{name}/shards"])["tokens"] for name in ("web", "wikipedia"))
    rows = {r["name"]: r for r in _budget(capsys, "--data", "web_wiki", "--tokens", str(4 * web))["mixture"]}
    assert rows["web"]["warning"] is None  # under 4 epochs: as good as fresh
    assert rows["wikipedia"]["epochs"] > 4 and "epochs" in rows["wikipedia"]["warning"]
    # 40 epochs of Wikipedia: past R_D*, little value left
    rows = {r["name"]: r for r in _budget(capsys, "--data", "web_wiki", "--tokens", str(40 * wiki / 0.3))["mixture"]}
    assert rows["wikipedia"]["epochs"] == pytest.approx(40)
    assert "little value left" in rows["wikipedia"]["warning"]
    assert pretrain_main(["budget", "--data", "web_wiki", "--tokens", str(40 * wiki / 0.3)]) == 0
    assert "warning: wikipedia: 40.0 epochs: little value left" in capsys.readouterr().out


def test_budget_refuses_a_mixture_source_not_built(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert pretrain_main(["budget", "--data", "llama1", "--tokens", "1B"]) == 2
    assert "data source 'web'" in capsys.readouterr().err


def test_sources_tokenized_with_different_tokenizers_are_refused(tmp_path, capsys):
    """The same id would be another piece of text in each source: training on both is silent garbage."""
    web = make_token_dataset(tmp_path / "web", n_docs=40, seed=1)
    wiki = make_token_dataset(tmp_path / "wiki", n_docs=40, seed=2)
    manifest = json.loads((tmp_path / "wiki" / "manifest.json").read_text())
    manifest["tokenizer"]["model_sha256"] = "another-tokenizer"
    (tmp_path / "wiki" / "manifest.json").write_text(json.dumps(manifest))
    config = tmp_path / "train.yaml"
    config.write_text(yaml.safe_dump(tiny_config([web, wiki], str(tmp_path / "run"))))
    assert pretrain_main(["train", str(config)]) == 2
    err = capsys.readouterr().err
    assert "2 different tokenizers" in err and "Traceback" not in err
    assert not (tmp_path / "run" / "checkpoints").exists()
