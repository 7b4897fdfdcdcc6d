"""lid.176 + lingua ensemble: the languages lid.176 lacks or confuses with English get their own
label, Norwegian is split into Bokmål and Nynorsk, confident labels stay, mixed-script texts are not
called English, nor texts lid.176 gives little English, configs may name lingua's languages only when lingua is on, and
``auto`` (the default) turns it on where lingua is installed and says so."""

from __future__ import annotations

import json
import logging
import pickle
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from dataprep.classify.langid import LanguageID, lingua_installed, uses_lingua
from dataprep.core.config import ConfigError, load_config


@pytest.fixture(scope="module")
def sentences(shared_data):
    rows = [
        json.loads(line)
        for line in (shared_data / "langid" / "lingua-sentences-75langs-300each.jsonl").open(encoding="utf-8")
    ]
    return lambda lang, n=30, contains="": [r["text"] for r in rows if r["lang"] == lang and contains in r["text"]][:n]


def _accuracy(stage, texts, lang):
    return sum(p == lang for p in stage.predict(texts)[0]) / len(texts)


@pytest.mark.parametrize("accuracy", ["high", "low"])
def test_languages_lid176_lacks_or_calls_english(sentences, accuracy):
    old, new = LanguageID(second_opinion="none"), LanguageID(second_opinion="lingua", lingua_accuracy=accuracy)
    for lang in ("zu", "xh", "sn", "nb"):
        texts = sentences(lang)
        assert _accuracy(old, texts, lang) == 0.0  # lid.176 has no such label
        assert _accuracy(new, texts, lang) >= (0.7 if accuracy == "high" else 0.6), lang  # low: trigrams only


def test_mixed_script_text_is_not_called_english(sentences):
    # Urdu sentences behind an English HTTP header or site title: lingua alone reads them as English
    texts = sentences("ur", 100, "Connection: close")[:5] + sentences("ur", 100, "Maeeshat India")[:2]
    stage = LanguageID(second_opinion="lingua")
    assert len(texts) == 7 and stage.predict(texts)[0] == ["ur"] * 7
    assert stage.take_counters()["lingua_mixed_script_kept"] >= 5  # others: lingua itself says Urdu
    english = "Click on a list name to get more information about the list, or to subscribe. 東京"
    assert stage.predict([english])[0] == ["en"]  # a few other letters do not stop English


@pytest.mark.parametrize("accuracy", ["high", "low"])
def test_english_needs_lid176_support(sentences, accuracy):
    # Irish sentences about English places ("Bicester Is baile suite in Oxfordshire é Bicester."): lingua's
    # trigrams call some English, lid.176 gives English under 0.3
    texts = [t for t in sentences("ga", 300, " Is ") if "suite" in t][:10]
    stage = LanguageID(second_opinion="lingua", lingua_accuracy=accuracy)
    unchecked = LanguageID(second_opinion="lingua", lingua_accuracy=accuracy, english_support=0.0)
    assert "en" in unchecked.predict(texts)[0]
    assert "en" not in stage.predict(texts)[0]
    assert stage.take_counters()["lingua_english_unsupported"] >= 1
    english = "Funded by the Health Research Council of New Zealand for three years."
    assert stage.predict([english])[0] == ["en"]


def test_only_confident_long_english_pages_skip_lingua(sentences):
    english_page = " ".join(sentences("en", 10))
    zulu_page = " ".join(sentences("zu", 10))  # lid.176 lacks Zulu: unsure, so lingua still decides it
    short = sentences("en", 1)
    stage = LanguageID(second_opinion="lingua")
    assert stage.predict([english_page, zulu_page] + short)[0] == ["en", "zu", "en"]
    counters = stage.take_counters()
    assert counters["lingua_trusted_english"] == 1 and counters["lingua_asked"] == 2
    always = LanguageID(second_opinion="lingua", trust_english_chars=None)
    assert always.predict([english_page])[0] == ["en"]
    assert always.take_counters()["lingua_asked"] == 1


def test_lingua_leaves_lid176s_confident_label_of_a_long_page(sentences):
    new = LanguageID(second_opinion="lingua")
    page = " ".join(sentences("de", 40))
    langs, scores = new.predict([page, ""])
    assert langs == ["de", None] and scores[0] > 0.9 and scores[1] == 0.0
    assert new.take_counters()["lingua_asked"] >= 0


def test_the_language_gate_applies_to_lingua_labels(sentences):
    out, reasons = LanguageID(second_opinion="lingua", languages=["en"]).process(
        pa.table({"id": ["0"], "text": [" ".join(sentences("zu", 5))]})
    )
    assert reasons == ["langid:zu"]  # not admitted by the English gate


def test_config_accepts_lingua_languages_only_with_lingua():
    load_config({"stages": [{"stage": "langid", "languages": ["nb", "zu"], "second_opinion": "lingua"}]})
    with pytest.raises(ConfigError, match="'zu' is not a language"):
        load_config({"stages": [{"stage": "langid", "languages": ["zu"], "second_opinion": "none"}]})


def test_auto_uses_lingua_where_installed(caplog, sentences):
    assert lingua_installed() and uses_lingua("auto") and not uses_lingua("none")
    with caplog.at_level(logging.INFO, logger="dataprep.classify.langid"):
        load_config({"stages": [{"stage": "langid", "languages": ["zu"]}]})  # the default is auto
    assert "auto -> lingua" in caplog.text
    assert _accuracy(LanguageID(), sentences("zu"), "zu") >= 0.7


def test_auto_uses_lid176_alone_without_lingua(caplog, monkeypatch, sentences):
    monkeypatch.setattr("dataprep.classify.langid.lingua_installed", lambda: False)  # as on an install without lingua
    with caplog.at_level(logging.INFO, logger="dataprep.classify.langid"):
        load_config({"stages": [{"stage": "langid", "languages": ["en"]}]})
    assert "auto -> lid.176 alone" in caplog.text
    assert _accuracy(LanguageID(), sentences("zu"), "zu") == 0.0


def test_executors_follow_the_choice_made_where_the_stage_was_built(monkeypatch):
    """``auto`` resolves once, where the pipeline is configured; an executor without lingua fails with the
    cause instead of silently labelling with lid.176 alone."""
    shipped = pickle.loads(pickle.dumps(LanguageID()))  # built where lingua is installed, as Spark ships it
    monkeypatch.setattr("dataprep.classify.langid.lingua_installed", lambda: False)  # an executor without lingua
    with pytest.raises(ImportError, match=r"install 'ccpretrain\[data\]' on every executor"):
        shipped.predict(["Ein kurzer Satz."])
    result = shipped.apply(pa.table({"id": ["a"], "text": ["Ein kurzer Satz."]}))
    assert result.kept.num_rows == 0 and result.dropped.column("drop_reason").to_pylist() == ["error:ImportError"]
    assert LanguageID(second_opinion="none").predict(["Ein kurzer Satz."])[0] == ["de"]  # lid.176 alone still works


@pytest.fixture(scope="module")
def gate_review(shared_data) -> tuple[dict, set]:
    """bench/langid/langid_gate_review.yaml (the reviewed view of bench_langid.py) and the (lang, text) pairs
    of the sentence set it reviews."""
    review = yaml.safe_load(
        (Path(__file__).resolve().parents[3] / "bench" / "langid" / "langid_gate_review.yaml").read_text(
            encoding="utf-8"
        )
    )
    rows = {
        (r["lang"], r["text"])
        for r in map(
            json.loads, (shared_data / "langid" / "lingua-sentences-75langs-300each.jsonl").open(encoding="utf-8")
        )
    }
    return review, rows


def test_gate_review_names_sentences_of_the_set_under_their_label(gate_review):
    """The review must name sentences the set holds under the label it says, or it would quietly review nothing."""
    review, rows = gate_review
    entries = review["changed"] + review["kept"]
    assert [e for e in entries if (e["lang"], e["text"]) not in rows] == []


def test_gate_review_gives_only_the_gates_two_verdicts_on_non_english_sentences(gate_review):
    review, _ = gate_review
    entries = review["changed"] + review["kept"]
    assert {e["verdict"] for e in review["changed"]} == {"en", "none"}
    assert all(e["lang"] != "en" for e in entries)
