"""Toxicity stage: word lists (English whole words, Chinese without boundaries), the shipped English
model, a user-trained fastText model, the three actions, per-language routing and edge cases."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dataprep.core.config import ConfigError, parse_stages
from dataprep.safety.toxicity import ToxicityFilter, load_word_lists, split_units

CLEAN_EN = "The library reopened on Monday after two years of repairs.\nVisitors queued before nine o'clock."
TOXIC_EN = "You are a fucking idiot and a stupid piece of shit, go to hell you asshole.\nFuck off."
CLEAN_ZH = "今天天气很好，我们去公园散步吧。图书馆周一重新开放。"
TOXIC_ZH = "你这个傻逼，操你妈的王八蛋。"


def _batch(texts, langs=None):
    cols = {"id": [str(i) for i in range(len(texts))], "text": pa.array(texts, pa.string())}
    if langs is not None:
        cols["lang"] = pa.array(langs, pa.string())
    return pa.table(cols)


def test_english_word_scores_count_whole_words():
    lists = load_word_lists(True, ())
    flagged, total = lists["en"].count("Fuck this, but Scunthorpe and shitake are fine.")
    assert (flagged, total) == (1, 8)  # whole words only: Scunthorpe, shitake are not hits


def test_chinese_word_scores_count_substrings():
    lists = load_word_lists(True, ())
    flagged, total = lists["zh"].count(TOXIC_ZH)  # 傻逼 + 操你妈 + 王八蛋 (他妈的 is not in the text)
    assert flagged == 8 and total == len([c for c in TOXIC_ZH if c not in "，。"])
    assert lists["zh"].count(CLEAN_ZH)[0] == 0


@pytest.fixture(scope="module")
def word_filtered() -> tuple[dict, dict]:
    """Clean and toxic English and Chinese and a toxic Italian text through the word lists alone: the kept
    rows and each dropped id's reason."""
    stage = ToxicityFilter(model="none")
    texts = [CLEAN_EN, TOXIC_EN, CLEAN_ZH, TOXIC_ZH, "Buongiorno a tutti, fuck."]
    result = stage.apply(_batch(texts, ["en", "en", "zh", "zh", "it"]))
    kept = {r["id"]: r for r in result.kept.to_pylist()}
    return kept, dict(zip(result.dropped.column("id").to_pylist(), result.dropped.column("drop_reason").to_pylist()))


def test_the_drop_action_routes_the_word_lists_by_language(word_filtered):
    _, dropped = word_filtered
    assert dropped == {"1": "toxicity:words", "3": "toxicity:words"}


def test_the_drop_action_stores_the_scores_of_what_it_keeps(word_filtered):
    kept, _ = word_filtered
    assert kept["0"]["toxicity_words"] == 0.0 and kept["2"]["toxicity_words"] == 0.0
    assert kept["4"]["toxicity_words"] is None  # no Italian list: not scored rather than scored 0
    assert kept["0"]["toxicity_model"] is None  # model: none


def test_without_lang_column_all_lists_apply():
    out, reasons = ToxicityFilter(model="none").process(_batch([TOXIC_ZH, CLEAN_EN]))
    assert reasons == ["toxicity:words", None]


def test_the_english_model_scores_english_only():
    stage = ToxicityFilter(words_threshold=None)
    out, reasons = stage.process(_batch([CLEAN_EN, TOXIC_EN, CLEAN_ZH], ["en", "en", "zh"]))
    scores = out.column("toxicity_model").to_pylist()
    assert scores[0] < 0.2 and scores[1] > 0.9 and scores[2] is None
    assert out.column("toxicity_model_max").to_pylist()[1] >= scores[1]
    assert reasons == [None, "toxicity:model", None]


@pytest.fixture(scope="module")
def lines_removed():
    """A page with one toxic line among calm ones, and a page of toxic lines only, with remove_lines."""
    doc = "A calm first line about gardening.\nFuck you, you worthless piece of shit.\nA calm last line about tomatoes."
    return ToxicityFilter(action="remove_lines").apply(_batch([doc, "Fuck off.\nShit."], ["en", "en"]))


def test_remove_lines_keeps_the_rest_of_the_page(lines_removed):
    row = lines_removed.kept.to_pylist()[0]
    assert row["text"] == "A calm first line about gardening.\nA calm last line about tomatoes."
    assert row["toxicity_removed"] == 1 and row["toxicity_words"] > 0  # scores describe the original


def test_remove_lines_drops_a_page_of_toxic_lines_only(lines_removed):
    assert lines_removed.dropped.column("drop_reason").to_pylist() == ["toxicity:all_removed"]


def test_sentence_units_rejoin_to_the_original():
    text = "First one. Second one! 第三句。第四句？ Last without end"
    units = split_units(text, "sentence")
    assert "".join(units) == text and len(units) == 5
    stage = ToxicityFilter(action="remove_lines", unit="sentence", model="none")
    out, _ = stage.process(_batch(["Nice day. Fuck this shit. Nice night."]))
    assert out.column("text").to_pylist() == ["Nice day. Nice night."]


@pytest.fixture(scope="module")
def annotated():
    """A toxic text, an empty one, a missing one and blanks through the annotate action: stage and result."""
    stage = ToxicityFilter(action="annotate")
    return stage, stage.apply(_batch([TOXIC_EN, "", None, "   \n  "], ["en", "en", None, "en"]))


def test_annotate_keeps_everything(annotated):
    stage, result = annotated
    assert result.kept.num_rows == 4 and result.dropped.num_rows == 0
    assert stage.output_schema(_batch(["x"], ["en"]).schema) == result.kept.schema


def test_annotate_scores_an_empty_text_zero(annotated):
    rows = annotated[1].kept.to_pylist()
    assert rows[1]["toxicity_words"] == 0.0 and rows[1]["toxicity_model"] == 0.0


def test_extra_word_list_from_config(tmp_path):
    extra = tmp_path / "de.txt"
    extra.write_text("# German test list\narschloch\n", encoding="utf-8")
    (stage,) = parse_stages([{"stage": "toxicity", "model": "none", "word_lists": {"de": [str(extra)]}}])
    _, reasons = stage.process(_batch(["Du Arschloch!", "Guten Tag!"], ["de", "de"]))
    assert reasons == ["toxicity:words", None]


def test_config_errors():
    with pytest.raises(ConfigError, match="model_path"):
        parse_stages([{"stage": "toxicity", "model": "fasttext"}])
    with pytest.raises(ConfigError, match="action"):
        parse_stages([{"stage": "toxicity", "action": "delete"}])


def test_user_trained_fasttext_model_scores_any_language(tmp_path):
    from dataprep.classify.fasttext_classifier import FastTextClassifier

    toxic = [
        "du bist ein dummer idiot",
        "halt die klappe du idiot",
        "du dummer trottel verschwinde",
        "idiot trottel dumm",
    ]
    clean = [
        "das wetter ist heute schön",
        "wir gehen in den park",
        "die bibliothek ist geöffnet",
        "ein schöner tag im garten",
    ]
    path = tmp_path / "tox.bin"
    FastTextClassifier.train(toxic * 25 + clean * 25, ["toxic"] * 100 + ["clean"] * 100, str(path), epoch=25)
    stage = ToxicityFilter(model="fasttext", model_path=str(path), words_threshold=None, model_threshold=0.5)
    out, reasons = stage.process(_batch(["du dummer idiot", "heute ist das wetter schön"], ["de", "de"]))
    scores = out.column("toxicity_model").to_pylist()
    assert scores[0] > 0.5 > scores[1] and reasons == ["toxicity:model", None]
