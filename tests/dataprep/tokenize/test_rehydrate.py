"""Rehydration (FineWeb-2): minhash_dedup's ``sample_weight`` reaches training through the shards.
``tokenize: repeat_by`` writes each kept document as many times as its weight says (on Spark, in a
whole pipeline); the manifest counts every copy in ``tokens`` and each document once in
``unique_tokens``, which is what ``pretrain budget --data`` takes as the corpus size."""

from __future__ import annotations

import json
from collections import Counter

import pyarrow.parquet as pq
import pytest

from dataprep.core.config import load_config
from dataprep.tokenize.shards import ShardWriter, open_dataset
from dataprep.tokenize.stage import copies
from dataprep.tokenize.tokenizer import Tokenizer, train_tokenizer
from dataprep.tokenize.verify import verify_dataset
from dedup_corpus import real_documents
from pipelines.pipeline_run import run_pipeline
from pretrain.cli import main as pretrain_cli
from pretrain.components.shard_totals import shard_totals

WEIGHTS = {"2": 2.0, "3-10": 3.5}


@pytest.fixture(scope="module")
def tokenizer_dir(shared_data, tmp_path_factory):
    lines = (shared_data / "langid" / "lingua-sentences-75langs-300each.jsonl").read_text(encoding="utf-8").splitlines()
    texts = [json.loads(line)["text"] for line in lines[:3000]]
    path = str(tmp_path_factory.mktemp("tok") / "tokenizer")
    train_tokenizer(texts, path, vocab_size=1000, seed=1)
    return path


def _crawl(shared_data) -> list[dict]:
    """Real documents, some fetched two or four times (lightly edited copies: near duplicates)."""
    texts = [t for t in real_documents(shared_data) if len(t) > 500][:24]
    docs = [{"id": f"d{i:02d}", "text": t} for i, t in enumerate(texts)]
    for i in range(0, 12):
        for k in range(1 if i % 2 else 3):
            docs.append({"id": f"c{i:02d}-{k}", "text": texts[i] + f"\nShared on {k + 1} sites."})
    return docs


def _run(spark, tmp_path, docs, tokenizer_dir, name: str, repeat: bool):
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    tokenize = {
        "stage": "tokenize",
        "tokenizer": tokenizer_dir,
        "output_dir": str(tmp_path / name),
        "tokens_per_shard": 2000,
    }
    stages = [
        {"stage": "minhash_dedup", "sample_weights": WEIGHTS},
        {**tokenize, **({"repeat_by": "sample_weight"} if repeat else {})},
    ]
    config = load_config(
        {
            "input": {"paths": [str(tmp_path / "in.jsonl")]},
            "output": {"dir": str(tmp_path / f"out-{name}")},
            "stages": stages,
        }
    )
    return pq.read_table(run_pipeline(config, spark=spark).corpus_dir).to_pylist(), str(tmp_path / name)


def test_rehydrated_shards_hold_each_document_as_often_as_its_weight_says(spark, shared_data, tokenizer_dir, tmp_path):
    corpus, shards = _run(spark, tmp_path, _crawl(shared_data), tokenizer_dir, "rehydrated", repeat=True)
    assert {r["sample_weight"] for r in corpus} == {1.0, 2.0, 3.5}
    tok = Tokenizer.load(tokenizer_dir)
    written = Counter(tuple(int(t) for t in doc) for shard in open_dataset(shards) for doc in shard)
    expected = {r["id"]: copies(r["sample_weight"], r["id"]) for r in corpus}
    assert set(expected.values()) >= {1, 2} and {3, 4} & set(expected.values())
    for row in corpus:
        ids = tuple(int(t) for t in tok.encode_batch([row["text"]], False, True)[0])
        assert written[ids] == expected[row["id"]], row["id"]
    manifest = json.loads(open(f"{shards}/manifest.json").read())
    assert manifest["documents"] == sum(expected.values()) and manifest["unique_documents"] == len(corpus)
    assert manifest["unique_tokens"] == sum(r["num_tokens"] for r in corpus)
    assert manifest["tokens"] == sum(r["num_tokens"] * expected[r["id"]] for r in corpus) > manifest["unique_tokens"]
    assert manifest["repeat_by"] == "sample_weight" and verify_dataset(shards) == []


def test_budget_unique_tokens_are_unchanged_by_repetition(spark, shared_data, tokenizer_dir, tmp_path, capsys):
    docs = _crawl(shared_data)
    _, plain = _run(spark, tmp_path, docs, tokenizer_dir, "plain", repeat=False)
    _, repeated = _run(spark, tmp_path, docs, tokenizer_dir, "repeated", repeat=True)
    plain_manifest = json.loads(open(f"{plain}/manifest.json").read())
    assert json.loads(open(f"{repeated}/manifest.json").read())["tokens"] > plain_manifest["tokens"]
    assert shard_totals([repeated]) == {**shard_totals([plain]), "directories": [repeated]}
    assert shard_totals([plain])["tokens"] == plain_manifest["tokens"]
    capsys.readouterr()  # the pipelines' own output
    assert pretrain_cli(["budget", "--compute", "1e18", "--data", repeated, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["unique_tokens"] == plain_manifest["tokens"]


def test_copies_round_fractional_weights_by_id():
    draws = [copies(2.5, f"doc{i}") for i in range(4000)]
    assert set(draws) == {2, 3} and abs(draws.count(3) / 4000 - 0.5) < 0.03
    assert copies(2.5, "doc7") == copies(2.5, "doc7") and copies(None, "x") == 1 and copies(0.0, "x") == 0
    with pytest.raises(ValueError, match="weights must be 0 or more"):
        copies(-1.0, "bad")


def test_the_shard_writer_spreads_a_documents_copies_apart(tmp_path):
    import numpy as np

    with ShardWriter(str(tmp_path / "s"), np.uint16, 10_000) as writer:
        for i, n in enumerate([3, 1, 0, 2]):
            writer.add(np.array([i, i], np.uint16), n)
        (shard,) = writer.close()
    order = [int(d[0]) for d in open_dataset_files(tmp_path / "s-00000")]
    assert order == [0, 1, 3, 0, 3, 0] and (shard["documents"], shard["unique_documents"], shard["unique_tokens"]) == (
        6,
        3,
        6,
    )


def open_dataset_files(prefix):
    from dataprep.tokenize.shards import IndexedShard

    return list(IndexedShard(str(prefix)))


def test_fineweb2_names_its_published_table():
    from dataprep.dedup.weights import NAMED_TABLES, parse_weights, weights_for

    sizes = [1, 2, 3, 4, 5, 99, 100, 999, 1000, 50_000]
    table = parse_weights(NAMED_TABLES["fineweb2"])
    assert weights_for(sizes, table) == [1, 2, 3, 3, 5, 5, 8, 8, 1, 1]  # FineWeb-2's README
    with pytest.raises(ValueError, match="no table named 'fineweb3'"):
        parse_weights("fineweb3")


def test_the_rehydrate_preset_uses_the_fineweb2_table():
    from dataprep.dedup.weights import NAMED_TABLES, parse_weights

    config = load_config("rehydrate", check_assets=False)
    minhash, tokenize = config.stages[-2], config.stages[-1]
    assert minhash.sample_weights == "fineweb2" and tokenize.repeat_by == "sample_weight"
    assert parse_weights(NAMED_TABLES["fineweb2"]) == minhash.weight_ranges()
