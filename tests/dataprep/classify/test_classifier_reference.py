"""``dataprep train-classifier --positives ... --negatives ...``: DCLM's recipe from reference text, with
negatives sampled on Spark (seeded, as many as asked, the same at any partitioning), a held-out split
scored at the shares top_fraction keeps, and one model per language when asked. Real fastText."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataprep.classify.fasttext_classifier import FastTextClassifier
from dataprep.classify.reference import DCLM_RECIPE, precision_recall_at_shares, read_texts
from dataprep.classify.training import split_heldout
from dataprep.quality.classifier import QualityClassifier
from dedup_corpus import real_documents
from pipelines.cli import main as dataprep_main
from pipelines.sample_texts import read_documents, sample_texts

SMALL = [
    "--dim",
    "16",
    "--bucket",
    "20000",
    "--epoch",
    "30",
    "--lr",
    "0.1",
    "--min-count",
    "1",
    "--threads",
    "1",
]  # DCLM's sizes need 100k+ examples


@pytest.fixture(scope="module")
def sentences(shared_data):
    rows = [
        json.loads(line)
        for line in (shared_data / "langid" / "lingua-sentences-75langs-300each.jsonl").open(encoding="utf-8")
    ]
    return {lang: [r["text"] for r in rows if r["lang"] == lang] for lang in ("en", "de")}


def _pages(lines: list[str], per_page: int = 5) -> list[str]:
    return [" ".join(lines[i : i + per_page]) for i in range(0, len(lines) - per_page + 1, per_page)]


def _write_jsonl(path, texts, field="text"):
    path.write_text("".join(json.dumps({field: t}) + "\n" for t in texts), encoding="utf-8")
    return str(path)


def _sample(spark, paths: list[str], n: int, seed: int) -> list[str]:
    return list(sample_texts(read_documents(spark, paths), n, seed)[0])


def test_negatives_are_a_seeded_sample_whatever_the_files(spark, shared_data, tmp_path):
    crawl = real_documents(shared_data)
    one = _write_jsonl(tmp_path / "all.jsonl", crawl)
    parts = []
    for k in range(4):
        (tmp_path / "parts").mkdir(exist_ok=True)
        parts.append(_write_jsonl(tmp_path / "parts" / f"p{k}.jsonl", crawl[k::4]))
    a = _sample(spark, [one], 12, seed=1)
    assert len(a) == 12 and set(a) <= set(crawl)
    assert _sample(spark, [str(tmp_path / "parts")], 12, seed=1) == a
    assert _sample(spark, [one], 12, seed=2) != a
    assert len(_sample(spark, [one], 10_000, seed=1)) == len(set(crawl)) or len(crawl) != len(set(crawl))
    # a pipeline's output: only the kept documents are drawn
    dropped = pa.table({"text": ["DROPPED PAGE"] * 5 + crawl[:5], "drop_reason": ["x"] * 5 + [None] * 5})
    pq.write_table(dropped, tmp_path / "part-0.parquet")
    assert sorted(_sample(spark, [str(tmp_path / "part-0.parquet")], 100, seed=0)) == sorted(crawl[:5])
    # the same rule for a tokenizer's sample, drawn from the DataFrame as it is
    texts, info = sample_texts(spark.read.parquet(str(tmp_path / "part-0.parquet")), 100, seed=0)
    assert sorted(texts) == sorted(crawl[:5]) and info["corpus_documents"] == 5
    (tmp_path / "notes.txt").write_text("not a document file")
    with pytest.raises(ValueError, match="Parquet or JSONL"):
        _sample(spark, [str(tmp_path / "notes.txt")], 1, seed=0)


def test_reference_training_prints_heldout_precision_at_kept_shares(spark, shared_data, sentences, tmp_path, capsys):
    reference = tmp_path / "reference.txt"
    reference.write_text("\n".join(_pages(sentences["en"])) + "\n\n", encoding="utf-8")  # plain text, one page a line
    assert read_texts([str(reference)])[0] == _pages(sentences["en"])
    crawl = _write_jsonl(tmp_path / "crawl.jsonl", real_documents(shared_data))
    out = tmp_path / "ref.bin"
    code = dataprep_main(
        [
            "train-classifier",
            "--positives",
            str(reference),
            "--negatives",
            crawl,
            "--negatives-count",
            "40",
            "--heldout",
            "0.3",
            "--output",
            str(out),
            "--seed",
            "3",
            *SMALL,
        ]
    )
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert code == 0 and out.exists()
    assert (
        report["labels"]["cc"] + report["labels"]["hq"] == report["train_examples"] and report["heldout_examples"] == 30
    )
    assert {k: report["recipe"][k] for k in ("wordNgrams", "dim")} == {"wordNgrams": 2, "dim": 16}
    assert [row["keep"] for row in report["heldout"]] == [0.1, 0.2, 0.5] and "precision" in captured.err
    # the figures are those of the saved model on the held-out split: the same seeded sample and shuffle,
    # recounted here by hand (the model's quality on 70 examples is noise; test_quality_classifier tests learning)
    positives, _ = read_texts([str(reference)])
    examples = [(t, "hq") for t in positives] + [(t, "cc") for t in _sample(spark, [crawl], 40, seed=3)]
    held, _ = split_heldout(examples, 0.3, 3)
    scores = FastTextClassifier.load(str(out)).score([t for t, _ in held], "hq")
    reference_total = sum(label == "hq" for _, label in held)
    for row in report["heldout"]:
        kept = [label for score, (_, label) in zip(scores, held) if score > row["threshold"]]
        hits = kept.count("hq")
        assert (row["kept"], row["precision"], row["recall"]) == (
            len(kept),
            round(hits / len(kept), 4),
            round(hits / reference_total, 4),
        )
        assert abs(len(kept) - row["keep"] * len(held)) <= 1  # top_fraction's cut-off: the asked share, up to ties


def test_one_model_per_language(spark, sentences, tmp_path, capsys):
    rng = random.Random(0)

    def salad(line: str) -> str:  # spam-like word salad: the reference's words without its sentences
        words = line.lower().replace(".", "").replace(",", "").split()
        rng.shuffle(words)
        return " ".join(words + ["click", "here", "buy", "now"])

    positives = _write_jsonl(
        tmp_path / "ref.jsonl", _pages(sentences["en"][:150]) + _pages(sentences["de"][:150]), "body"
    )
    negatives = _write_jsonl(
        tmp_path / "neg.jsonl",
        [salad(p) for p in _pages(sentences["en"][150:]) + _pages(sentences["de"][150:])],
        "body",
    )
    out = tmp_path / "lang.bin"
    code = dataprep_main(
        [
            "train-classifier",
            "--positives",
            positives,
            "--negatives",
            negatives,
            "--text-field",
            "body",
            "--languages",
            "en,de",
            "--output",
            str(out),
            *SMALL,
            "--lr",
            "0.05",
        ]
    )
    assert code == 0 and (tmp_path / "lang.en.bin").exists() and (tmp_path / "lang.de.bin").exists()
    assert capsys.readouterr().out.count('"output"') == 2
    # the stage scores each document with its language's model, the others with model_path's
    models = {lang: str(tmp_path / f"lang.{lang}.bin") for lang in ("en", "de")}
    stage = QualityClassifier(model_paths=models, model_path=models["en"])
    texts = [sentences["de"][-1], sentences["en"][-1], sentences["de"][-2]]
    batch = pa.table({"text": texts, "lang": ["de", "en", "fr"]})
    scores = stage.process(batch)[0].column("quality_score").to_pylist()
    de, en = FastTextClassifier.load(models["de"]), FastTextClassifier.load(models["en"])
    assert scores == [de.score(texts[:1], "hq")[0], en.score(texts[1:2], "hq")[0], en.score(texts[2:], "hq")[0]]
    assert de.score(texts[:1], "hq") != en.score(texts[:1], "hq")
    with pytest.raises(ValueError, match="needs a 'lang' column"):
        stage.process(pa.table({"text": texts}))


def test_the_recipe_is_dclms():
    assert {k: DCLM_RECIPE[k] for k in ("dim", "lr", "epoch", "wordNgrams", "minCount")} == {
        "dim": 256,
        "lr": 0.1,
        "epoch": 3,
        "wordNgrams": 2,
        "minCount": 3,
    }


def test_precision_and_recall_at_each_kept_share():
    rows = precision_recall_at_shares(
        [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0], [True, True, False, True] + [False] * 6
    )
    assert [(r["kept"], r["precision"], r["recall"]) for r in rows] == [
        (1, 1.0, 0.3333),
        (2, 1.0, 0.6667),
        (5, 0.6, 1.0),
    ]


def test_a_held_out_split_without_positives_reports_null_not_nan():
    from dataprep.classify.reference import format_report

    rows = precision_recall_at_shares([0.9, 0.5, 0.1], [False, False, False])
    assert all(r["recall"] is None for r in rows)
    json.dumps(rows, allow_nan=False)  # NaN is not JSON: a strict reader of --json output would fail
    assert " - " in format_report(rows)


def test_the_model_file_is_sized_to_the_training_set(tmp_path):
    """fastText allocates its whole n-gram table: 18 examples with the recipe's ceiling wrote 205 MB."""
    from dataprep.classify.fasttext_classifier import FastTextClassifier

    texts = [f"a reference sentence about rivers and hills, number {i}" for i in range(9)]
    texts += [f"click here to subscribe and win a prize now {i}" for i in range(9)]
    model = FastTextClassifier.train(texts, ["hq"] * 9 + ["lq"] * 9, str(tmp_path / "m.bin"), **DCLM_RECIPE)
    assert (tmp_path / "m.bin").stat().st_size < 5_000_000
    assert model.model.f.getArgs().bucket < DCLM_RECIPE["bucket"]
