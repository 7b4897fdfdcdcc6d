"""A run's lineage: what ``OUT_DIR/lineage.json`` and every checkpoint record of the sources, how a resumed
run keeps the data of its earlier stretch, how a checkpoint from before lineage records still resumes, and
how ``pretrain lineage --uses`` tells the runs of one corpus from another's."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from dataprep.tokenize.manifest import load_manifest
from pretrain.cli import main as pretrain_main
from pretrain.config.loading import load_train_config
from pretrain.lineage import read_lineage
from pretrain.train import run
from train_fixtures import make_token_dataset, tiny_config

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _config(data, out, steps: int = 2) -> dict:
    return tiny_config(
        data,
        out,
        max_steps=steps,
        device="cpu",
        checkpoint={"every_steps": 2, "keep_last": 1},
        log={"every_steps": 1, "val_every_steps": 100, "val_batches": 1},
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lineage")
    a = make_token_dataset(root / "a", n_docs=100, seed=1)
    b = make_token_dataset(root / "b", n_docs=100, seed=2)
    run(load_train_config(_config(a, root / "runs" / "on-a")))
    run(load_train_config(_config(b, root / "runs" / "on-b")))
    return root


def test_the_lineage_of_a_run_and_its_checkpoints_records_each_source(runs):
    record = read_lineage(str(runs / "runs" / "on-a"))
    assert record["found_in"].endswith("lineage.json")
    (source,) = record["current"]["sources"]
    manifest = load_manifest(str(runs / "a"))
    assert source["manifest_sha256"] == hashlib.sha256((runs / "a" / "manifest.json").read_bytes()).hexdigest()
    assert source["tokens"] == manifest["tokens"] and source["pipeline_run"] is None
    assert [s["bin_sha256"] for s in source["shards"]] == [s["bin_sha256"] for s in manifest["shards"]]
    assert record["current"]["code"]["package"] == "ccpretrain" and record["earlier"] == []
    in_checkpoint = read_lineage(str(runs / "runs" / "on-a" / "checkpoints" / "step-00000002"))
    assert in_checkpoint["current"] == record["current"]


def test_resuming_on_other_data_keeps_the_earlier_stretch(runs, tmp_path):
    checkpoint = str(runs / "runs" / "on-a" / "checkpoints" / "step-00000002")
    with pytest.warns(UserWarning, match="training data differ"):
        run(load_train_config(_config(str(runs / "b"), tmp_path / "continued", steps=4)), resume=checkpoint)
    record = read_lineage(str(tmp_path / "continued" / "checkpoints" / "step-00000004"))
    assert [s["path"] for s in record["current"]["sources"]] == [str(runs / "b")]
    assert [s["path"] for e in record["earlier"] for s in e["sources"]] == [str(runs / "a")]


def test_a_checkpoint_without_lineage_still_resumes(runs, tmp_path):
    import shutil

    old = tmp_path / "old"
    shutil.copytree(runs / "runs" / "on-a", old)
    state_file = old / "checkpoints" / "step-00000002" / "train_state.json"
    state = json.loads(state_file.read_text())
    del state["lineage"]
    state_file.write_text(json.dumps(state))
    os.remove(old / "lineage.json")
    assert pretrain_main(["lineage", str(old / "checkpoints" / "step-00000002")]) == 2
    run(load_train_config(_config(str(runs / "a"), old, steps=4)), resume="auto")
    assert read_lineage(str(old))["current"]["sources"][0]["path"] == str(runs / "a")


def test_uses_lists_the_runs_of_one_corpus(runs, capsys):
    assert pretrain_main(["lineage", "--uses", str(runs / "a"), str(runs / "runs")]) == 0
    out = capsys.readouterr().out
    assert "1 run(s)" in out and str(runs / "runs" / "on-a") in out and "on-b" not in out
    assert pretrain_main(["lineage", str(runs / "runs" / "on-a"), str(runs / "runs" / "on-b")]) == 2
    assert "several folders go with --uses" in capsys.readouterr().err
