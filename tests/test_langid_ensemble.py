"""lid.176 + lingua ensemble: the languages lid.176 lacks or confuses with English get their own
label, Norwegian is split into Bokmål and Nynorsk, confident labels stay, and configs may name
lingua's languages only when lingua is on."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from dataprep.config import ConfigError, load_config
from dataprep.langid import LanguageID


@pytest.fixture(scope="module")
def sentences(shared_data):
    rows = [json.loads(line) for line in (shared_data / "langid" / "lingua-sentences-75langs-300each.jsonl").open(encoding="utf-8")]
    return lambda lang, n=30: [r["text"] for r in rows if r["lang"] == lang][:n]


def _accuracy(stage, texts, lang):
    return sum(p == lang for p in stage.predict(texts)[0]) / len(texts)


def test_languages_lid176_lacks_or_calls_english(sentences):
    old, new = LanguageID(), LanguageID(second_opinion="lingua")
    for lang in ("zu", "xh", "sn", "nb"):
        texts = sentences(lang)
        assert _accuracy(old, texts, lang) == 0.0  # lid.176 has no such label
        assert _accuracy(new, texts, lang) >= 0.7, lang


def test_confident_labels_and_long_pages_stay(sentences):
    new = LanguageID(second_opinion="lingua")
    page = " ".join(sentences("de", 40))
    langs, scores = new.predict([page, ""])
    assert langs == ["de", None] and scores[0] > 0.9 and scores[1] == 0.0
    out, reasons = LanguageID(second_opinion="lingua", languages=["en"]).process(pa.table({"id": ["0"], "text": [" ".join(sentences("zu", 5))]}))
    assert reasons == ["langid:zu"]  # not admitted by the English gate
    assert new.take_counters()["lingua_asked"] >= 0


def test_config_accepts_lingua_languages_only_with_lingua():
    load_config({"stages": [{"stage": "langid", "languages": ["nb", "zu"], "second_opinion": "lingua"}]})
    with pytest.raises(ConfigError, match="'zu' is not a language"):
        load_config({"stages": [{"stage": "langid", "languages": ["zu"]}]})
