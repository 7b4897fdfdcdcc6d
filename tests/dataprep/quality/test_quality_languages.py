"""Per-language quality settings: Chinese counted in jieba words, Japanese in Sudachi words (per
character without it), thresholds per language with the config winning, a language added at run time,
and Japanese ruby readings kept out of the text."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from dataprep.html.extract import Extract
from dataprep.quality import languages
from dataprep.quality.gopher import GopherQuality
from dataprep.quality.gopher_repetition import GopherRepetition
from dataprep.quality.languages import (
    LANGUAGES,
    LanguageSettings,
    add_language,
    count_sentences,
    language_settings,
    split_words,
)

ROOT = Path(__file__).resolve().parents[3]
PAGES = {
    p["id"]: p for p in yaml.safe_load((ROOT / "tests" / "data" / "safety_pages.yaml").read_text(encoding="utf-8"))
}


def test_shipped_languages_have_settings():
    for code in ("zh", "ja", "ko", "th", "ru", "de", "fr", "es", "en"):
        assert language_settings(code).stop_words, code
    assert language_settings("zh").splitter == "jieba"
    assert language_settings("xx").stop_words == LANGUAGES["en"].stop_words  # unknown: English's


def test_chinese_is_counted_in_words_not_characters():
    words = split_words("长江是中国第一长河，也是亚洲最长的河流。", "zh")
    assert words[:3] == ("长江", "是", "中国") and "，" not in words  # marks are not words
    text = "长江是中国第一长河，也是亚洲最长的河流。" * 3  # 60 characters, about 30 words
    assert GopherQuality(language="zh").decide(text, "zh")[0] == "gopher_short_doc"


def _japanese_sentences(shared_data: Path) -> list[str]:
    """The 300 Japanese web sentences (Leipzig corpora) of the shared langid set."""
    with open(shared_data / "langid" / "lingua-sentences-75langs-300each.jsonl", encoding="utf-8") as f:
        return [r["text"] for r in map(json.loads, f) if r["lang"] == "ja"]


def test_japanese_is_counted_in_sudachi_words(shared_data):
    pytest.importorskip("sudachipy")
    words = split_words("関西国際空港で選挙管理委員会の発表があった。", "ja")
    assert words == ("関西", "国際", "空港", "で", "選挙", "管理", "委員会", "の", "発表", "が", "あっ", "た")
    sentences = _japanese_sentences(shared_data)
    text = "".join(sentences[:40])  # a paragraph of real web prose, ~1,800 characters
    n_words, n_chars = len(split_words(text, "ja")), len(languages.split_words_cjk(text))
    assert (
        count_sentences(text, "ja") * 10 < n_words < 0.7 * n_chars
    )  # about 24 words a sentence, 1.7 characters a word
    assert GopherQuality(language="ja").decide(text, "ja")[0] is None
    assert GopherRepetition(language="ja").decide(text, "ja")[0] is None
    # the stop-word rule (2 of の に は を た が ...) holds in nearly every sentence, and every paragraph passes
    wanted = language_settings("ja").stop_words
    assert sum(len(wanted.intersection(split_words(s, "ja"))) >= 2 for s in sentences) >= 0.95 * len(sentences)
    paragraphs = ["".join(sentences[i : i + 10]) for i in range(0, len(sentences), 10)]
    assert all(GopherQuality(language="ja").decide(p, "ja")[0] is None for p in paragraphs)
    # 50 words is now a real minimum: the first two sentences (88 characters, 47 words) are too few
    two = "".join(sentences[:2])
    assert (
        len(languages.split_words_cjk(two)) >= 50
        and GopherQuality(language="ja").decide(two, "ja")[0] == "gopher_short_doc"
    )
    # SudachiPy refuses inputs over 49,149 bytes; a long page is cut into pieces first
    assert len(split_words("\n".join([text] * 20), "ja")) == 20 * n_words


def test_japanese_without_sudachi_counts_characters(monkeypatch, caplog):
    text = "関西国際空港で選挙管理委員会の発表があった。"
    languages._sudachi.cache_clear()
    languages.split_words.cache_clear()
    with monkeypatch.context() as m, caplog.at_level(logging.WARNING):
        m.setitem(__import__("sys").modules, "sudachipy", None)  # as if the ja extra were not installed
        assert split_words(text, "ja") == tuple(languages.split_words_cjk(text))
    assert "Japanese words are counted per character" in caplog.text
    languages._sudachi.cache_clear()
    languages.split_words.cache_clear()


def test_encyclopedia_with_citations_and_infobox_passes_the_alpha_rule():
    text = PAGES["zh-encyclopedia"]["text"].replace("。", "[1]。", 3).replace("公里", "公里[2]", 2)
    infobox = "| 长度 | 6300公里 |\n| 流域面积 | 180万平方公里 |\n| 发源地 | 唐古拉山脉 |\n| 河口 | 东海 |\n"
    for page in (text, infobox + text):
        assert GopherQuality(language="zh").decide(page, "zh")[0] is None
        assert GopherRepetition(language="zh").decide(page, "zh")[0] is None


def test_gopher_thresholds_follow_the_language():
    stage = GopherQuality(language="auto")
    assert stage.param("min_avg_word_length", "zh") is None  # the language switches the rule off
    assert stage.param("min_avg_word_length", "en") == 3
    assert stage.param("max_avg_word_length", "de") == 12


def test_an_explicit_threshold_wins_except_over_a_rule_the_language_switches_off():
    explicit = GopherQuality(language="auto", min_avg_word_length=2, max_avg_word_length=20)
    assert explicit.param("max_avg_word_length", "de") == 20  # the config wins over a language's value
    assert explicit.param("min_avg_word_length", "zh") is None  # but not over a rule the language switches off


def test_add_a_language():
    try:
        add_language(LanguageSettings("qx", stop_words=frozenset({"ka", "ta"}), thresholds={"min_doc_words": 3}))
        stage = GopherQuality(language="qx")
        assert stage.param("min_doc_words", "qx") == 3
        assert stop_words_of("qx") == {"ka", "ta"}
    finally:
        LANGUAGES.pop("qx", None)


def stop_words_of(code: str) -> set[str]:
    return set(language_settings(code).stop_words)


def test_japanese_ruby_readings_are_not_inlined():
    sentence = (
        "<ruby>漢字<rp>(</rp><rt>かんじ</rt><rp>)</rp></ruby>は中国から伝わった文字です。"
        "<ruby>東京<rt>とうきょう</ruby>は首都です。"
    )
    html = f"<html><body><article><h1>漢字</h1><p>{sentence * 5}</p></article></body></html>"
    for engine in ("blocks", "resiliparse", "trafilatura"):
        text = Extract(engine=engine).extract(html)
        assert "漢字は中国" in text and "かんじ" not in text and "とうきょう" not in text, engine
    assert "かんじ" in Extract(ruby_readings=True).extract(html)
    upper = (
        html.replace("<rt>", "<RT>")
        .replace("</rt>", "</RT>")
        .replace("<rp>", "<RP>")
        .replace("</rp>", "</RP>")
        .replace("ruby>", "RUBY>")
    )
    text = Extract().extract(upper)
    assert "かんじ" not in text and "漢字は中国" in text


def test_chinese_minhash_shingles_are_jieba_words():
    from dataprep.dedup.minhash import MinHashDedup
    from dataprep.dedup.normalize import normalize, shingle_hashes, shingles

    zh = PAGES["zh-encyclopedia"]["text"]
    texts = [zh, PAGES["ja-encyclopedia"]["text"], PAGES["ru-news"]["text"], "长江", None]
    words = shingles(normalize(zh), 5, 5, chinese_words=True)
    assert b" " in words[0] and len(words) < len(shingles(normalize(zh), 5, 5)) / 1.3  # fewer, longer shingles
    hashes, offsets = shingle_hashes(texts, 5, 5, chinese_words=True)
    counts = np.diff(offsets).tolist()
    assert counts == [len(shingles(normalize(t), 5, 5, chinese_words=True)) for t in texts]
    plain, plain_offsets = shingle_hashes(texts, 5, 5)
    assert counts[1:] == np.diff(plain_offsets).tolist()[1:]  # only the Chinese text changes
    # a lightly edited copy of the article is still found
    edited = zh.replace("长江是中国第一长河", "长江是我国第一长河").replace("世界第三长", "世界上第三长")
    result = MinHashDedup().run_local(_ids([zh, edited, PAGES["zh-news-gambling-crackdown"]["text"]]))
    assert result.kept.num_rows == 2 and result.dropped.column("id").to_pylist() == ["1"]


def _ids(texts):
    import pyarrow as pa

    return pa.table({"id": [str(i) for i in range(len(texts))], "text": texts})


def test_no_letter_is_a_symbol():
    """is_symbol_word answers words of letters without looking at their characters: that is exact only
    while no letter of any script is a symbol or a sentence end."""
    letters = (chr(c) for c in range(sys.maxunicode + 1) if chr(c).isalpha())
    assert not any(map(languages._all_symbols.__wrapped__, letters))
    assert languages.is_symbol_word("…") and languages.is_symbol_word("!?") and not languages.is_symbol_word("A.")
