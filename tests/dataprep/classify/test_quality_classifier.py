"""fastText classifier wrapper, ``dataprep train-classifier`` and the quality_classifier stage."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from dataprep.classify.fasttext_classifier import FastTextClassifier
from dataprep.quality.classifier import QualityClassifier
from pipelines.cli import main as dataprep_main


@pytest.fixture(scope="module")
def sentences(shared_data):
    rows = [
        json.loads(line)
        for line in (shared_data / "langid" / "lingua-sentences-75langs-300each.jsonl").open(encoding="utf-8")
    ]
    return {lang: [r["text"] for r in rows if r["lang"] == lang] for lang in ("en", "de")}


@pytest.fixture(scope="module")
def model_path(sentences, tmp_path_factory):
    """Positive label 'hq' = English sentences, 'lq' = German ones (first 250 of each), via the CLI."""
    tmp = tmp_path_factory.mktemp("clf")
    data = tmp / "labelled.jsonl"
    with data.open("w", encoding="utf-8") as fh:
        for lang, label in (("en", "hq"), ("de", "lq")):
            for text in sentences[lang][:250]:
                fh.write(json.dumps({"content": text, "quality": label}) + "\n")
        fh.write(json.dumps({"content": "no label"}) + "\n")
    out = tmp / "quality.bin"
    code = dataprep_main(
        [
            "train-classifier",
            "--input",
            str(data),
            "--output",
            str(out),
            "--text-field",
            "content",
            "--label-field",
            "quality",
        ]
    )
    assert code == 0 and out.exists()
    return str(out)


def test_scores_separate_held_out_examples(model_path, sentences):
    model = FastTextClassifier.load(model_path)
    assert sorted(model.labels) == ["hq", "lq"]
    en = model.score(sentences["en"][250:], "hq")
    de = model.score(sentences["de"][250:], "hq")
    assert all(0.0 <= s <= 1.0 for s in en + de)
    assert sum(s > 0.5 for s in en) / len(en) > 0.8 and sum(s < 0.5 for s in de) / len(de) > 0.8
    assert model.score(["", "line one\nline two"], "hq")[0] == 0.0
    with pytest.raises(ValueError, match="not in model labels"):
        model.score(["x"], "spam")


def test_quality_classifier_drops_what_scores_below_its_threshold(model_path, sentences):
    texts = sentences["en"][260:265] + sentences["de"][260:265]
    batch = pa.table({"id": [str(i) for i in range(10)], "text": texts})
    result = QualityClassifier(model_path=model_path, threshold=0.5).apply(batch)
    assert result.kept.column("quality_score").type == pa.float64()
    assert set(result.dropped.column("drop_reason").to_pylist()) <= {"quality_score_below_threshold"}
    assert result.kept.num_rows >= 4 and result.dropped.num_rows >= 4
    assert QualityClassifier(model_path=model_path).apply(batch).kept.num_rows == 10


def test_bad_model_files_fail_clearly(model_path, tmp_path):
    with pytest.raises(FileNotFoundError):
        FastTextClassifier.load(str(tmp_path / "missing.bin"))
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"definitely not a model" * 10)
    with pytest.raises(ValueError, match="not a usable fastText model"):
        FastTextClassifier.load(str(junk))
    truncated = tmp_path / "truncated.bin"
    data = open(model_path, "rb").read()
    truncated.write_bytes(data[: len(data) // 3])
    with pytest.raises(ValueError, match="truncated"):
        FastTextClassifier.load(str(truncated))
    with pytest.raises(ValueError, match="two distinct labels"):
        FastTextClassifier.train(["a b c"] * 5, ["x"] * 5, str(tmp_path / "m.bin"))
    with pytest.raises(ValueError, match="does not exist"):
        QualityClassifier(model_path=str(tmp_path / "missing.bin"))
    # a corrupt model file in the stage is an error for every document, never a crash
    batch = pa.table({"id": ["1"], "text": ["hello"]})
    result = QualityClassifier(model_path=str(junk)).apply(batch)
    assert result.dropped.column("drop_reason").to_pylist() == ["error:UsageError"]


def test_shipped_model_tells_forms_from_prose():
    """The default model (dataprep/assets/quality) scores a newsletter form far below running prose."""
    form = "\n".join(
        [
            "Subscribe to our newsletter",
            "First name",
            "Last name",
            "Email address",
            "Subscribe now",
            "You can unsubscribe at any time.",
            "Privacy policy",
            "Back to top",
        ]
    )
    prose = (
        "The river rises in the hills north of the town and reaches the sea after forty miles. Mills were built "
        "along its banks in the eighteenth century to grind grain, and by 1850 the town had grown around a bridge."
    )
    result = QualityClassifier(threshold=0.5).apply(pa.table({"text": [form, prose]}))
    scores = result.kept.column("quality_score").to_pylist()
    assert result.kept.column("text").to_pylist() == [prose] and scores[0] > 0.5
    assert result.dropped.num_rows == 1
