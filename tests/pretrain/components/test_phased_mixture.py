"""Mixtures in phases (``data.phases``, or ``phases:`` in a mixture file): the shares drawn in each phase are
its weights, the order stays a pure function of the sample position (a source's samples go on across the
boundary without repeating), a run stopped inside the second phase resumes bit-equal, the metrics say
which phase drew what, and the saved config reloads with its phases."""

from __future__ import annotations

import os

import numpy as np
import pytest
import yaml

from dataprep.core.validation import ConfigError
from pretrain.components.dataloader import build_loaders
from pretrain.components.metrics import read_metrics
from pretrain.components.mixture_order import BLOCK, MixtureOrder
from pretrain.config.loading import load_train_config
from pretrain.train import run
from train_fixtures import make_token_dataset, tiny_config

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PHASES = [{"until": 0.5, "weights": {"web": 0.9, "wiki": 0.1}}, {"until": 1.0, "weights": {"web": 0.2, "wiki": 0.8}}]


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("phased")
    return (make_token_dataset(root / "web", n_docs=200, seed=1), make_token_dataset(root / "wiki", n_docs=60, seed=2))


def _config(sources, out, **overrides) -> dict:
    web, wiki = sources
    cfg = tiny_config([], out, max_steps=8, checkpoint={"every_steps": 2, "keep_last": 5}, **overrides)
    cfg["data"] = {
        "sources": [{"path": web, "name": "web"}, {"path": wiki, "name": "wiki", "weight": 0.5}],
        "val_fraction": 0.1,
        "phases": PHASES,
    }
    return cfg


def test_phased_mixture_shares_per_phase_are_the_weights():
    end = 6 * BLOCK + 300  # a phase boundary inside a block
    order = MixtureOrder([5000, 700], [0.5, 0.5], seed=1, phases=[(end, [0.9, 0.1]), (None, [0.25, 0.75])])
    first, second = order.drawn(0, end), order.drawn(end, end + 5 * BLOCK)
    assert first[0] / first.sum() == pytest.approx(0.9, abs=0.02)
    assert second[1] / second.sum() == pytest.approx(0.75, abs=0.02)
    assert order.drawn_in_phase(end + 100)[0] == 1 and order.drawn_in_phase(end)[0] == 0


def test_phased_mixture_order_is_a_pure_function_of_the_position():
    end = 1500
    order = MixtureOrder([400, 90], [0.5, 0.5], seed=3, phases=[(end, [0.7, 0.3]), (None, [0.1, 0.9])])
    again = MixtureOrder([400, 90], [0.5, 0.5], seed=3, phases=[(end, [0.7, 0.3]), (None, [0.1, 0.9])])
    positions = range(0, 4000)
    drawn = [order(p) for p in positions]
    assert [again(p) for p in reversed(positions)] == drawn[::-1]  # any order of asking: the same samples
    for start, stop in [(0, 4000), (1000, 1600), (1499, 1501), (1500, 3000)]:
        expected = np.bincount([drawn[p][0] for p in range(start, stop)], minlength=2)
        assert order.drawn(start, stop).tolist() == expected.tolist()
    # a source's samples go on across the boundary: its first epoch holds each sample once
    wiki = [i for s, i in drawn if s == 1][:90]
    assert sorted(wiki) == list(range(90))


def test_phased_mixture_of_one_phase_is_the_order_without_phases():
    plain = MixtureOrder([300, 200], [0.6, 0.4], seed=5)
    phased = MixtureOrder([300, 200], [0.1, 0.9], seed=5, phases=[(None, [0.6, 0.4])])
    assert [plain(p) for p in range(3000)] == [phased(p) for p in range(3000)]


def test_phased_mixture_places_phases_at_fractions_of_the_run(sources, tmp_path):
    cfg = load_train_config(_config(sources, tmp_path))
    train, _ = build_loaders(cfg.data, cfg.seq_len, 8, 2, 0, 1, steps=400)
    order = train.order
    assert order.ends[0] == 200 * 8  # until 0.5 of 400 steps of 8 samples
    first, second = order.drawn(0, 1600), order.drawn(1600, 3200)
    assert first[0] / first.sum() == pytest.approx(0.9, abs=0.02)
    assert second[1] / second.sum() == pytest.approx(0.8, abs=0.02)
    val_loader = build_loaders(cfg.data, cfg.seq_len, 8, 2, 0, 1, steps=400)[1]
    assert val_loader.order.num_phases == 1  # validation keeps the sources' weights, comparable across phases


def test_phased_mixture_run_stopped_in_the_second_phase_resumes_bit_equal(sources, tmp_path):
    run(load_train_config(_config(sources, tmp_path / "whole")))
    out = tmp_path / "resumed"
    run(load_train_config(_config(sources, out)), stop_at=6)  # phase 2 began after step 4
    run(load_train_config(_config(sources, out)), resume="auto")
    whole, resumed = (read_metrics(os.path.join(d, "metrics.jsonl")) for d in (tmp_path / "whole", out))
    train = {r["step"]: r for r in whole if r["kind"] == "train"}
    again = {r["step"]: r for r in resumed if r["kind"] == "train"}
    assert [train[s]["loss"] for s in range(1, 9)] == [again[s]["loss"] for s in range(1, 9)]
    assert [train[s]["phase"] for s in range(1, 9)] == [1, 1, 1, 1, 2, 2, 2, 2]
    assert train[8]["source_tokens"] == again[8]["source_tokens"]
    assert train[8]["phase_source_share"]["wiki"] > 0.5 > train[4]["phase_source_share"]["wiki"]


def test_phased_mixture_config_is_checked(sources, tmp_path):
    bad = _config(sources, tmp_path)
    bad["data"]["phases"] = [{"until": 0.5, "weights": {"web": 1.0}}]
    with pytest.raises(ConfigError, match="the last be 1.0"):
        load_train_config(bad)
    bad["data"]["phases"] = [{"until": 1.0, "weights": {"books": 1.0}}]
    with pytest.raises(ConfigError, match="weighs books, not a source of this run"):
        load_train_config(bad)


def test_phased_mixture_config_reloads_from_the_run(sources, tmp_path):
    from pretrain.inference.loading import save_run_dir

    cfg = load_train_config(_config(sources, tmp_path / "run"))
    save_run_dir(cfg)
    reloaded = load_train_config(str(tmp_path / "run" / "config.yaml"))
    assert reloaded.data.phases == cfg.data.phases and reloaded.data.phase_weights()[1] == (1.0, [0.2, 0.8])


def test_phased_mixture_file_carries_its_phases(sources, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.makedirs("out")
    for name, path in zip(("web", "wikipedia"), sources):
        os.makedirs(f"out/{name}")
        os.symlink(path, f"out/{name}/shards")
    cfg = tiny_config([], tmp_path / "run")
    cfg["data"] = {"mixture": "web_wiki_anneal"}
    data = load_train_config(cfg).data
    assert [(p.until, p.weights) for p in data.phases] == [
        (0.8, {"web": 0.8, "wikipedia": 0.2}),
        (1.0, {"web": 0.3, "wikipedia": 0.7}),
    ]
    mine = tmp_path / "mine.yaml"
    mine.write_text(yaml.safe_dump({"sources": [{"name": "web", "path": "out/web/shards"}], "phases": "anneal"}))
    cfg["data"] = {"mixture": str(mine)}
    with pytest.raises(ConfigError, match="expected `phases:`"):
        load_train_config(cfg)


def test_phased_mixture_budget_gives_each_source_its_epochs_per_phase(sources, tmp_path, monkeypatch, capsys):
    import json

    from pretrain.cli import main as pretrain_main
    from pretrain.components.shard_totals import shard_totals

    monkeypatch.chdir(tmp_path)
    for name, path in zip(("web", "wikipedia"), sources):
        os.makedirs(f"out/{name}")
        os.symlink(path, f"out/{name}/shards")
    unique = {name: shard_totals([f"out/{name}/shards"])["tokens"] for name in ("web", "wikipedia")}
    tokens = 10 * unique["web"]
    assert pretrain_main(["budget", "--data", "web_wiki_anneal", "--tokens", str(tokens), "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["mixture"]}
    wiki = rows["wikipedia"]
    assert [p["epochs"] for p in wiki["phases"]] == pytest.approx(
        [0.8 * 0.2 * tokens / unique["wikipedia"], 0.2 * 0.7 * tokens / unique["wikipedia"]]
    )
    assert wiki["epochs"] == pytest.approx(sum(p["epochs"] for p in wiki["phases"]))
    assert rows["web"]["weight"] == pytest.approx(0.8 * 0.8 + 0.2 * 0.3)  # its share of the whole run
    assert pretrain_main(["budget", "--data", "web_wiki_anneal", "--tokens", str(tokens)]) == 0
    assert (
        f"(phase 1: {wiki['phases'][0]['epochs']:.1f}, phase 2: {wiki['phases'][1]['epochs']:.1f} epochs)"
        in capsys.readouterr().out
    )


def test_the_training_section_shows_each_phases_source_shares(sources, tmp_path):
    from pretrain.inference.plot import phase_shares, training_section

    out = tmp_path / "run"
    run(load_train_config(_config(sources, out)))
    train = [r for r in read_metrics(os.path.join(out, "metrics.jsonl")) if r["kind"] == "train"]
    found = phase_shares(train)
    assert [step for step, _ in found] == [1, 5] and found[1][1] == train[-1]["phase_source_share"]
    (table,) = training_section(str(out), str(tmp_path)).tables
    rows = dict(table[1])
    assert rows["phase 2 (from step 5) source share"] == ", ".join(f"{n} {v:.1%}" for n, v in found[1][1].items())
    assert (tmp_path / "training.png").stat().st_size > 0


def test_phased_mixture_demo_config_trains_with_the_document_mask(tmp_path, monkeypatch):
    """configs/train/tiny_cpu_phased.yaml as the docs show it, on stand-ins for the demo's two sources."""
    import shutil

    from pretrain.cli import main as pretrain_main

    monkeypatch.chdir(tmp_path)
    make_token_dataset(tmp_path / "out/demo/pipeline/shards", n_docs=200, seed=1, max_len=60)
    make_token_dataset(tmp_path / "out/demo/reference/shards", n_docs=40, seed=2, max_len=60)
    config = shutil.copy(
        os.path.join(os.path.dirname(__file__), "../../../configs/train/tiny_cpu_phased.yaml"), tmp_path
    )
    assert pretrain_main(["train", config, "--set", "max_steps=10", "--set", "log.every_steps=1"]) == 0
    train = [r for r in read_metrics(str(tmp_path / "runs/tiny_cpu_phased/metrics.jsonl")) if r["kind"] == "train"]
    assert [r["phase"] for r in train] == [1] * 8 + [2] * 2
    # 32 samples drawn per phase-2 block slice here: the shares move toward 0.5 (the exact shares: above)
    assert train[-1]["phase_source_share"]["reference"] > 0.3 > train[7]["phase_source_share"]["reference"]
