"""Shards written by megatron-core's own ``IndexedDatasetBuilder`` become trainable with ``dataprep
index-shards``: the manifest it writes passes ``verify-shards`` and ``pretrain train`` runs on them."""

from __future__ import annotations

import json

import numpy as np
import yaml

from megatron_reference import megatron_indexed_dataset
from pipelines.cli import main as dataprep_main
from pretrain.cli import main as pretrain_main
from train_fixtures import tiny_config

VOCAB = 128


def test_indexed_megatron_shards_train_a_model(tmp_path, capsys, one_torch_thread):
    import torch

    idx_mod = megatron_indexed_dataset()
    rng = np.random.default_rng(0)
    shards = tmp_path / "megatron"
    shards.mkdir()
    for part in range(2):
        builder = idx_mod.IndexedDatasetBuilder(str(shards / f"text_document_{part}.bin"), dtype=np.uint16)
        for _ in range(30):
            doc = np.append(rng.integers(3, VOCAB, int(rng.integers(5, 60))), 0)  # eos = 0 ends each document
            builder.add_document(torch.from_numpy(doc.astype(np.int64)), [len(doc)])
        builder.finalize(str(shards / f"text_document_{part}.idx"))

    assert dataprep_main(["index-shards", str(shards), "--vocab-size", "100", "--eos", "0"]) == 2  # ids up to 127
    assert "is not below --vocab-size 100" in capsys.readouterr().err
    assert dataprep_main(["index-shards", str(shards), "--vocab-size", str(VOCAB), "--eos", "0", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["num_shards"] == 2 and summary["documents"] == 60 and summary["dtype"] == "uint16"
    assert dataprep_main(["verify-shards", str(shards)]) == 0
    capsys.readouterr()

    cfg = tiny_config(str(shards), tmp_path / "run", max_steps=3, checkpoint={"every_steps": 3})
    (tmp_path / "train.yaml").write_text(yaml.safe_dump(cfg))
    assert pretrain_main(["train", str(tmp_path / "train.yaml"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["last_step"] == 3 and result["loss"] > 0
    # shards indexed without a tokenizer: exporting the model asks for one, in one line
    assert pretrain_main(["export", str(tmp_path / "run"), "--output", str(tmp_path / "hf")]) == 2
    err = capsys.readouterr().err
    assert "names no tokenizer model" in err and "pass --tokenizer DIR" in err and len(err.strip().splitlines()) == 1


def test_index_shards_refuses_a_folder_without_shards(tmp_path, capsys):
    assert dataprep_main(["index-shards", str(tmp_path), "--vocab-size", "10", "--eos", "0"]) == 2
    assert "no .idx/.bin shard pairs" in capsys.readouterr().err
