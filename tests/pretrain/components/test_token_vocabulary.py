"""Token ids against the vocabulary: a model smaller than the data's tokenizer is a config error before any
step, ``model.vocab_size: auto`` follows the data, and an id beyond the vocabulary in a shard stops training
and eval at the batch that holds it, naming the shard file and the token's offset."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import yaml

from dataprep.tokenize.shards import open_dataset
from pretrain.cli import main as pretrain_main
from pretrain.config.loading import load_train_config
from train_fixtures import VOCAB, make_token_dataset, tiny_config

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """One shard of about 1,200 tokens: an epoch is a few steps of tiny_config's batches."""
    return make_token_dataset(tmp_path_factory.mktemp("tokens"), n_docs=20, n_shards=1)


def _corrupt_copy(dataset: str, destination) -> tuple[str, int]:
    """A copy of the shards with one token (inside document 3) set to 0xFFFF; returns its .bin and offset."""
    shutil.copytree(dataset, destination)
    shard = open_dataset(str(destination))[0]
    offset = int(shard.doc_offsets[3]) + 1
    path = f"{shard.prefix}.bin"
    with open(path, "r+b") as fh:
        fh.seek(offset * shard.dtype.itemsize)
        fh.write(b"\xff\xff")
    return path, offset


def _config(tmp_path, shards, **overrides) -> str:
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(tiny_config(str(shards), tmp_path / "run", **overrides)))
    return str(path)


def test_training_stops_at_the_batch_with_an_id_beyond_the_vocabulary(dataset, tmp_path, capsys):
    bin_path, offset = _corrupt_copy(dataset, tmp_path / "bad")
    config = _config(tmp_path, tmp_path / "bad", max_steps=20, data={"val_fraction": 0.0})  # 20 steps: 2 epochs
    assert pretrain_main(["train", config]) == 2
    err = capsys.readouterr().err
    assert f"{bin_path}: token id 65535 at token offset {offset} is outside the vocabulary" in err
    assert f"(vocab_size {VOCAB})" in err and "dataprep verify-shards" in err and "Traceback" not in err


def test_eval_on_shards_names_an_id_beyond_the_vocabulary(dataset, tmp_path, capsys):
    assert pretrain_main(["train", _config(tmp_path, dataset, max_steps=2)]) == 0
    bin_path, offset = _corrupt_copy(dataset, tmp_path / "bad")
    assert pretrain_main(["eval", str(tmp_path / "run"), "--data", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert f"{bin_path}: token id 65535 at token offset {offset} is outside the vocabulary" in err


def test_a_model_vocabulary_below_the_data_is_a_config_error_before_any_step(dataset, tmp_path, capsys):
    config = _config(tmp_path, dataset)
    assert pretrain_main(["train", config, "--set", "model.vocab_size=64"]) == 2
    err = capsys.readouterr().err
    assert f"vocabulary {VOCAB} (manifest vocab_size) exceeds the model's vocab_size 64" in err
    assert f"set model.vocab_size to {VOCAB} or auto" in err
    assert not (tmp_path / "run").exists()  # nothing written: no step ran


def test_model_vocab_size_auto_follows_the_data(dataset, tmp_path):
    cfg = tiny_config(dataset, tmp_path / "run")
    cfg["model"]["vocab_size"] = "auto"
    assert load_train_config(cfg).model.vocab_size == VOCAB
    del cfg["model"]["vocab_size"]  # left out: the same
    assert load_train_config(cfg).model.vocab_size == VOCAB
    cfg["data"]["sources"] = [{"path": str(tmp_path / "nowhere")}]
    with pytest.raises(FileNotFoundError, match="nowhere: no such folder"):
        load_train_config(cfg)


def test_a_model_vocabulary_far_beyond_the_data_warns(dataset, tmp_path, capsys):
    config = _config(tmp_path, dataset, max_steps=1)
    assert pretrain_main(["train", config, "--set", "model.vocab_size=32000", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["last_step"] == 1
    err = captured.err
    assert f"model.vocab_size 32000 exceeds the data's tokenizer vocabulary {VOCAB}" in err
    assert f"set model.vocab_size: auto (or {VOCAB})" in err
    run_config = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())
    assert run_config["model"]["vocab_size"] == 32000  # pinned: kept as set


def test_index_shards_names_an_id_beyond_the_vocabulary(dataset, tmp_path, capsys):
    from pipelines.cli import main as dataprep_main

    bin_path, offset = _corrupt_copy(dataset, tmp_path / "bad")
    os.unlink(tmp_path / "bad" / "manifest.json")
    assert dataprep_main(["index-shards", str(tmp_path / "bad"), "--vocab-size", str(VOCAB), "--eos", "0"]) == 2
    err = capsys.readouterr().err
    name = os.path.basename(bin_path)[:-4]
    assert (
        f"shard {name}: token id 65535 at token offset {offset} of {name}.bin is not below --vocab-size {VOCAB}" in err
    )
