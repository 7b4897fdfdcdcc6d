"""Tokenizer training and the tokenize stage: exact round trip on real multilingual text, shards + manifest
in memory and on Spark (training from the corpus, reruns without duplicates), and the CLI."""

from __future__ import annotations

import json
import os
import warnings

import pyarrow.parquet as pq
import pytest

from dataprep.core.config import ConfigError, parse_stages
from dataprep.tokenize.manifest import load_manifest
from dataprep.tokenize.shards import open_dataset
from dataprep.tokenize.stage import Tokenize
from dataprep.tokenize.tokenizer import META_NAME, MODEL_NAME, Tokenizer, train_tokenizer
from dataprep.tokenize.verify import verify_dataset
from tokenizer_texts import EDGE_CASES, load_texts, texts_table


@pytest.fixture(scope="module")
def corpus(shared_data):
    lingua, docs = load_texts(shared_data)
    train = [r["text"] for r in lingua if r["line"] % 4] + docs[
        ::2
    ]  # 3 of 4 sentences per language, half the documents
    held_out = [r["text"] for r in lingua if r["line"] % 4 == 0] + docs[1::2]
    return {"train": train, "held_out": held_out, "docs": docs}


@pytest.fixture(scope="module")
def tokenizer_dir(corpus, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("tok") / "tokenizer")
    train_tokenizer(corpus["train"], path, vocab_size=4000, seed=1)
    return path


def test_tokenizer_folder_describes_itself(tokenizer_dir, corpus, tmp_path):
    tok = Tokenizer.load(tokenizer_dir)
    meta = json.loads(open(os.path.join(tokenizer_dir, META_NAME)).read())
    assert tok.vocab_size == meta["vocab_size"] == 4000
    assert tok.special_ids == meta["special_ids"] == {"unk": 0, "bos": 1, "eos": 2, "pad": 3}
    assert [tok.sp.id_to_piece(i) for i in range(4)] == ["<unk>", "<s>", "</s>", "<pad>"]
    assert meta["training"]["sample_documents"] == len(corpus["train"])
    assert meta["model_sha256"] == tok.sha256 and len(tok.sha256) == 64
    # The sample hash identifies the training text exactly: same text, same hash; other text, other hash.
    again = train_tokenizer(corpus["train"][:300], str(tmp_path / "a"), vocab_size=1000)
    same = train_tokenizer(corpus["train"][:300], str(tmp_path / "b"), vocab_size=1000)
    other = train_tokenizer(corpus["train"][1:301], str(tmp_path / "c"), vocab_size=1000)
    assert (
        again.meta["training"]["sample_sha256"]
        == same.meta["training"]["sample_sha256"]
        != other.meta["training"]["sample_sha256"]
    )
    with open(os.path.join(str(tmp_path / "a"), MODEL_NAME), "wb") as fh:
        fh.write(open(os.path.join(tokenizer_dir, MODEL_NAME), "rb").read())
    with pytest.raises(ValueError, match="does not match tokenizer_meta.json"):
        Tokenizer.load(str(tmp_path / "a"))
    with pytest.raises(ValueError, match="too small"):
        train_tokenizer(["x"], str(tmp_path / "d"), vocab_size=200)


def test_round_trip_exact_on_multilingual_text(tokenizer_dir, corpus):
    tok = Tokenizer.load(tokenizer_dir)
    texts = corpus["held_out"] + EDGE_CASES
    encoded = tok.encode_batch(texts, add_eos=False)
    mismatches = [t for t, ids in zip(texts, encoded) if tok.decode(ids) != t]
    assert mismatches == []
    assert len(texts) > 5000
    pieces = tok.sp.encode(EDGE_CASES[2], out_type=str)
    assert "<0xF0>" in pieces  # 𓀀 (never seen in training) falls back to its UTF-8 bytes, not <unk>
    assert tok.unk_id not in {i for ids in encoded for i in ids.tolist()}
    with_specials = tok.encode_batch(["abc"], add_bos=True, add_eos=True)[0].tolist()
    assert with_specials == [tok.bos_id, *tok.encode("abc"), tok.eos_id] and tok.decode(with_specials) == "abc"


def test_shards_into_a_folder_of_other_files_delete_none_of_them(tokenizer_dir, corpus, tmp_path):
    """The stage deletes shards of its own an earlier run left, never another tool's .bin/.idx there."""
    out_dir = tmp_path / "shards"
    out_dir.mkdir()
    for name in ("gpt2_train.bin", "gpt2_train.idx", "notes.txt"):
        (out_dir / name).write_text("someone else's")
    (out_dir / "shard-old-00000.bin").write_text("an earlier run's shard")
    Tokenize(tokenizer=tokenizer_dir, output_dir=str(out_dir)).run_local(texts_table(corpus["docs"][:50]))
    names = {p.name for p in out_dir.iterdir()}
    assert {"gpt2_train.bin", "gpt2_train.idx", "notes.txt"} <= names and "shard-old-00000.bin" not in names
    assert verify_dataset(str(out_dir)) == []


def test_stage_text_to_shards_to_text(tokenizer_dir, corpus, tmp_path):
    texts = corpus["docs"] + [""] + corpus["held_out"][:2000]
    out_dir = str(tmp_path / "shards")
    stage = Tokenize(tokenizer=tokenizer_dir, output_dir=out_dir, tokens_per_shard=20_000)
    result = stage.run_local(texts_table(texts))
    assert result.dropped.column("drop_reason").to_pylist() == ["empty"]
    kept = result.kept.column("text").to_pylist()
    assert kept == [t for t in texts if t]
    shards = open_dataset(out_dir)
    assert len(shards) > 3
    docs = [doc for shard in shards for doc in shard]
    assert [len(d) for d in docs] == result.kept.column("num_tokens").to_pylist()
    tok = Tokenizer.load(tokenizer_dir)
    assert all(d[-1] == tok.eos_id for d in docs)
    assert [tok.decode(d[:-1]) for d in docs] == kept
    manifest = load_manifest(out_dir)
    assert manifest["tokenizer"]["model_sha256"] == tok.sha256 and manifest["vocab_size"] == 4000
    assert manifest["special_ids"]["eos"] == 2 and manifest["dtype"] == "uint16"
    assert manifest["documents"] == len(kept) and manifest["tokens"] == sum(len(d) for d in docs)
    assert Tokenizer.load(os.path.join(out_dir, "tokenizer")).sha256 == tok.sha256  # self-contained folder
    assert verify_dataset(out_dir) == []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from megatron.core.datasets.indexed_dataset import IndexedDataset
    first = IndexedDataset(os.path.join(out_dir, manifest["shards"][0]["name"]))
    assert [first[i].tolist() for i in range(len(first))] == [d.tolist() for d in docs[: len(first)]]


def test_encoder_error_is_a_drop_reason(tokenizer_dir, monkeypatch):
    tok = Tokenizer.load(tokenizer_dir)
    real = Tokenizer.encode_batch

    def fragile(self, texts, *args, **kwargs):
        if "poison" in texts:
            raise RuntimeError("encoder rejected input")
        return real(self, texts, *args, **kwargs)

    monkeypatch.setattr(Tokenizer, "encode_batch", fragile)
    table, reasons, docs = Tokenize(tokenizer=tokenizer_dir).encode(texts_table(["good", "poison", "", "fine"]), tok)
    assert reasons == [None, "error:RuntimeError", "empty", None]
    assert table.column("num_tokens").to_pylist()[1:3] == [0, 0] and len(docs) == 2


def test_stage_config_is_validated(tmp_path):
    with pytest.raises(ConfigError, match=r"stages\[0\] \(tokenize\): tokens_per_shrd: unknown key"):
        parse_stages([{"stage": "tokenize", "tokenizer": "t", "tokens_per_shrd": 5}])
    with pytest.raises(ConfigError, match=r"train.vocab_size"):
        parse_stages([{"stage": "tokenize", "tokenizer": "t", "train": {"vocab_size": 10}}])
    (stage,) = parse_stages(
        [{"stage": "tokenize", "tokenizer": str(tmp_path / "none"), "output_dir": str(tmp_path / "o")}]
    )
    with pytest.raises(FileNotFoundError, match="no tokenizer in .*dataprep train-tokenizer"):
        stage.run_local(texts_table(["text"]))


@pytest.fixture(scope="module")
def spark_tokenized(spark, corpus, tmp_path_factory) -> dict:
    """3,000 documents and an empty one tokenized on Spark in 3 partitions, training the tokenizer first; then
    rerun in 2 partitions after a "crash" that left a temporary file and a stray shard. What each run left."""
    from pipelines.global_runners import run_global
    from pipelines.steps import StepContext

    root = tmp_path_factory.mktemp("spark-tokenize")
    texts = corpus["train"][:3000] + [""]
    pq.write_table(texts_table(texts), root / "docs.parquet")
    df = spark.read.parquet(str(root / "docs.parquet"))
    stage = Tokenize(
        tokenizer=str(root / "tok"),
        train={"vocab_size": 1500, "sample_documents": 2000, "character_coverage": 0.99},
        tokens_per_shard=20_000,
    )
    ctx = StepContext(spark=spark, step_dir=str(root / "step"), config=None)
    out = run_global(df.repartition(3), stage, ctx).toPandas()
    shard_dir = str(root / "step" / "shards")
    first = {"out": out, "manifest": load_manifest(shard_dir), "problems": verify_dataset(shard_dir)}

    (root / "step" / "shards" / ".tmp-shard-00002-00000-abc.bin").write_bytes(b"partial")
    (root / "step" / "shards" / "shard-00009-00000.bin").write_bytes(b"stray")
    run_global(df.repartition(2), stage, ctx).count()
    return {"texts": texts, "tok": Tokenizer.load(str(root / "tok")), "shard_dir": shard_dir, "first": first}


def test_the_spark_stage_trains_the_tokenizer_then_shards(spark_tokenized):
    texts, tok, first = spark_tokenized["texts"], spark_tokenized["tok"], spark_tokenized["first"]
    out = first["out"]
    assert tok.meta["training"]["sample_documents"] == 2000 and tok.meta["training"]["corpus_documents"] == 3000
    assert len(out) == len(texts) and out["drop_reason"].tolist().count("empty") == 1
    manifest = first["manifest"]
    assert {s["name"][:11] for s in manifest["shards"]} == {"shard-00000", "shard-00001", "shard-00002"}
    assert manifest["documents"] == 3000 and manifest["tokens"] == int(out["num_tokens"].sum())
    assert first["problems"] == []


def test_a_spark_rerun_replaces_its_shards_without_duplicates(spark_tokenized):
    """Rerun with other partitioning (the tokenizer now exists) after a "crash" that left a temporary file
    and a stray shard: old shards are replaced, not added to, and the debris is removed."""
    texts, tok, shard_dir = spark_tokenized["texts"], spark_tokenized["tok"], spark_tokenized["shard_dir"]
    second = load_manifest(shard_dir)
    assert {s["name"][:11] for s in second["shards"]} == {"shard-00000", "shard-00001"}
    on_disk = sorted(f for f in os.listdir(shard_dir) if f not in ("manifest.json", "tokenizer"))
    assert on_disk == sorted(f"{s['name']}.{ext}" for s in second["shards"] for ext in ("bin", "idx"))
    decoded = sorted(tok.decode(doc[:-1]) for shard in open_dataset(shard_dir) for doc in shard)
    assert decoded == sorted(t for t in texts if t)
    assert second["tokens"] == spark_tokenized["first"]["manifest"]["tokens"] and verify_dataset(shard_dir) == []


def test_train_tokenizer_command(spark, corpus, tmp_path, capsys):
    from pipelines.cli import main

    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"body": t}) + "\n" for t in corpus["train"][:1500]), encoding="utf-8")
    out = str(tmp_path / "tok")
    args = ["train-tokenizer", "--input", str(path), "--text-field", "body", "--vocab-size", "1200", "--output", out]
    assert main(args + ["--sample-documents", "1000", "--character-coverage", "0.99"]) == 0
    assert "vocab 1200" in capsys.readouterr().out
    tok = Tokenizer.load(out)
    assert tok.meta["training"]["sample_documents"] == 1000 and tok.meta["model_type"] == "bpe"
    assert main(args) == 2
    assert "already holds a tokenizer; pass --force" in capsys.readouterr().err
