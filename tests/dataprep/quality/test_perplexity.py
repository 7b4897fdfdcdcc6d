"""CCNet-style perplexity: KN estimator correctness, train -> save -> load -> score round trip through the
CLI, reference text scoring lower than boilerplate, buckets and drops, and clear errors on bad models."""

from __future__ import annotations

import gzip
import json
import os
import shutil

import numpy as np
import pyarrow as pa
import pytest

from dataprep.quality.ngram_lm import NGramLM
from dataprep.quality.perplexity import Perplexity, PerplexityModel, load_model
from pipelines.cli import main as dataprep_main

BOILERPLATE = [
    "302 Found\n\nnginx/1.1.19",
    "Home | About | Contact | Login | Register\nCopyright 2024 All rights reserved\nPrivacy Policy | Terms",
    "cheap viagra buy now cheap viagra buy now best price cheap pills online pharmacy discount",
    "[ style: dark classic gorilla ]\n\nPhoto Gallery\n\n496\nPrevious\nPrevious\nNext\nNext",
]


def _reference(shared_data) -> list[str]:
    docs = []
    for name in ("dolma-cc_en_head-0091.jsonl.gz", "dolma-cc_en_head-0174.jsonl.gz"):
        with gzip.open(shared_data / "documents" / name, "rt", encoding="utf-8") as fh:
            docs += [json.loads(line)["text"] for line in fh]
    for name in ("redpajama-cc-2023-06-refined.jsonl", "redpajama-c4-refined.jsonl"):
        docs += [json.loads(line)["text"] for line in (shared_data / "documents" / name).open(encoding="utf-8")]
    rows = [
        json.loads(line)
        for line in (shared_data / "langid" / "lingua-sentences-75langs-300each.jsonl").open(encoding="utf-8")
    ]
    english = [r["text"] for r in rows if r["lang"] == "en"]
    return docs + [" ".join(english[i : i + 5]) for i in range(0, len(english), 5)]


@pytest.fixture(scope="module")
def model_dir(shared_data, tmp_path_factory):
    """Train through the CLI on all but 12 reference documents (held back for the checks below)."""
    tmp = tmp_path_factory.mktemp("ppl")
    docs = _reference(shared_data)
    rng = np.random.default_rng(1)
    order = rng.permutation(len(docs))
    train_path = tmp / "ref.jsonl"
    with train_path.open("w", encoding="utf-8") as fh:
        for i in order[12:]:
            fh.write(json.dumps({"text": docs[i]}) + "\n")
        fh.write("not json\n")  # a bad line is counted and skipped
    out = tmp / "model_en"
    assert (
        dataprep_main(
            [
                "train-ppl-model",
                "--input",
                str(train_path),
                "--lang",
                "en",
                "--output",
                str(out),
                "--vocab-size",
                "2000",
            ]
        )
        == 0
    )
    return str(out), [docs[i] for i in order[:12]]


def test_kneser_ney_distributions_sum_to_one():
    rng = np.random.default_rng(0)
    vocab = 12
    sentences = [rng.integers(3, vocab, size=rng.integers(1, 12)).tolist() for _ in range(200)]
    lm = NGramLM.train(sentences, order=3, vocab_size=vocab, bos=1, eos=2)
    for context in ([5, 7], [1, 1], [11, 3], [0, 4]):
        # every possible next token after the context, the end of sentence included
        logp = [lm.token_logprobs([context + [w]])[0][len(context)] for w in (0, 1, *range(3, vocab))]
        end = lm.token_logprobs([context])[0][-1]
        assert sum(10 ** np.array(logp)) + 10**end == pytest.approx(1.0, abs=1e-4)


def test_perplexity_model_separates_boilerplate_from_reference_text(model_dir):
    directory, held_back = model_dir
    model = PerplexityModel.load(directory)
    reference = model.perplexities(held_back)
    spam = model.perplexities(BOILERPLATE)
    assert np.all(np.isfinite(reference)) and np.all(np.isfinite(spam))
    assert np.median(reference) * 1.5 < np.median(spam), (reference, spam)


def test_perplexity_model_round_trips_through_its_files(model_dir):
    directory, held_back = model_dir
    meta = json.load(open(os.path.join(directory, "model.json")))
    assert meta["version"] == 1 and meta["order"] == 3 and meta["cutoffs"]["p30"] < meta["cutoffs"]["p60"]
    reference = PerplexityModel.load(directory).perplexities(held_back)
    # same scores after a reload (the file format round-trips)
    load_model.cache_clear()
    assert np.allclose(PerplexityModel.load(directory).perplexities(held_back), reference)


@pytest.fixture
def scored_batch(model_dir) -> pa.Table:
    """Four held-back texts, the boilerplate, an empty text and a missing one."""
    texts = model_dir[1][:4] + BOILERPLATE + ["", None]
    return pa.table({"id": [str(i) for i in range(len(texts))], "text": pa.array(texts, pa.string())})


def test_perplexity_stage_labels_each_document_with_its_score_bucket(model_dir, scored_batch):
    directory, _ = model_dir
    result = Perplexity(model_dir=directory).apply(scored_batch)
    assert result.kept.num_rows == scored_batch.num_rows
    ppl = result.kept.column("perplexity").to_pylist()
    buckets = result.kept.column("ppl_bucket").to_pylist()
    assert ppl[-1] is None and ppl[-2] is None and buckets[-1] is None  # empty text: unscored, kept
    assert set(buckets[4:8]) == {"tail"}


def test_drop_tail_drops_the_tail_bucket(model_dir, scored_batch):
    dropped = Perplexity(model_dir=model_dir[0], drop_tail=True).apply(scored_batch).dropped
    assert set(dropped.column("drop_reason").to_pylist()) == {"ppl_tail"}
    assert {"4", "5", "6", "7"} <= set(dropped.column("id").to_pylist())


def test_a_max_perplexity_above_every_score_drops_nothing(model_dir, scored_batch):
    capped = Perplexity(model_dir=model_dir[0], max_perplexity=1e9).apply(scored_batch)
    assert capped.dropped.num_rows == 0


def test_per_language_models_score_only_their_language(model_dir):
    directory, held_back = model_dir
    by_lang = pa.table({"id": ["a", "b"], "text": [held_back[0], held_back[1]], "lang": ["en", "fr"]})
    out = Perplexity(models={"en": directory}).apply(by_lang).kept
    assert out.column("perplexity").to_pylist()[1] is None and out.column("perplexity").to_pylist()[0] > 1


def test_bad_model_files_fail_clearly(model_dir, tmp_path):
    directory, _ = model_dir
    with pytest.raises(FileNotFoundError, match="no model.json"):
        PerplexityModel.load(str(tmp_path))
    broken = tmp_path / "broken"
    shutil.copytree(directory, broken)
    lm = broken / "lm.npz"
    lm.write_bytes(lm.read_bytes()[: lm.stat().st_size // 2])
    with pytest.raises(ValueError, match="not a readable n-gram model|damaged"):
        PerplexityModel.load(str(broken))
    meta = json.loads((broken / "model.json").read_text())
    (broken / "model.json").write_text(json.dumps({**meta, "version": 99}))
    with pytest.raises(ValueError, match="version 99"):
        PerplexityModel.load(str(broken))
    with pytest.raises(ValueError, match="model_dir"):
        Perplexity()
    assert (
        dataprep_main(
            [
                "train-ppl-model",
                "--input",
                str(tmp_path / "missing.jsonl"),
                "--lang",
                "en",
                "--output",
                str(tmp_path / "m"),
            ]
        )
        == 2
    )


def test_retraining_into_a_folder_replaces_only_the_models_own_files(shared_data, tmp_path, capsys):
    """The output folder is replaced when it holds an earlier model and nothing else; a file of the
    user's there is named and kept, and the earlier model stays as it was."""
    docs = _reference(shared_data)[:300]
    train = tmp_path / "ref.jsonl"
    train.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs), encoding="utf-8")
    out = tmp_path / "models"
    args = ["train-ppl-model", "--input", str(train), "--lang", "en", "--output", str(out), "--vocab-size", "300"]
    assert dataprep_main(args) == 0
    assert dataprep_main(args) == 0  # an earlier model only: replaced
    (out / "notes.txt").write_text("mine")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    assert dataprep_main(args) == 2
    err = capsys.readouterr().err
    assert "notes.txt" in err and len(err.strip().splitlines()) == 1, err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
