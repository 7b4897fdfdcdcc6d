"""Content safety on Chinese, Japanese and Russian pages (tests/data/safety_pages.yaml): harmful pages
are dropped by the safety stage made for them, with a reason naming it, and real prose survives the
whole multilingual pipeline (langid, Gopher/C4/FineWeb with per-language settings, safety.yaml)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from dataprep.core.config import parse_stages
from dataprep.core.runner import run_stages
from dataprep.safety.harmful import HarmfulContent, contact_count, load_category_lists, title_stuffing
from dataprep.safety.toxicity import load_word_lists
from dataprep.safety.url_filter import DomainSet, UrlFilter, load_categories
from dataprep.safety.word_lists import fold, unhide

ROOT = Path(__file__).resolve().parents[3]
PAGES = yaml.safe_load((ROOT / "tests" / "data" / "safety_pages.yaml").read_text(encoding="utf-8"))
PIPELINE = [
    {"stage": "langid", "languages": ["zh", "ja", "ru", "en"], "threshold": 0.5},
    {"include": "safety.yaml"},  # after extraction and langid, as safety.yaml says
    {"stage": "gopher_repetition", "language": "auto"},
    {"stage": "gopher_quality", "language": "auto"},
    {"stage": "c4_quality", "filter_no_terminal_punct": False, "language": "auto"},
    {"stage": "fineweb_quality", "language": "auto"},
]


def _table(pages, with_lang: bool = True) -> pa.Table:
    cols = {
        "id": [p["id"] for p in pages],
        "url": [p["url"] for p in pages],
        "title": [p["title"] for p in pages],
        "text": [p["text"] for p in pages],
    }
    if with_lang:
        cols["lang"] = [p["lang"] for p in pages]
    return pa.table(cols)


def test_folding_reveals_words_behind_hidden_separators():
    assert unhide(fold("成 人*小 說")) == "成人小说"  # spaces and symbols between characters, traditional form
    assert unhide(fold("ＡＢＣ p.o.r.n")) == "abc porn"  # full width, spelled-out letters
    assert unhide(fold("Mr. A. Smith")) == "mr. a. smith"  # one letter alone is not spelled out


def test_word_lists_per_script():
    lists = load_word_lists(True, ())
    assert lists["ru"].count("Застрахуйте машину.")[0] == 0  # prefix entries match word starts only
    assert lists["ru"].count("Пиздец, хуйня какая.")[0] == 2  # ...and their inflections
    assert lists["de"].count("Du Arschloch!")[0] == 1
    assert lists["ko"].count("이 씨발놈아")[0] == 2  # Hangul: anywhere, like CJK
    assert lists["ja"].count("お前なんか死ね")[0] == 2
    harmful = load_category_lists(True, ())
    # everyday words that contain a listed string stay clean: 보지 않았다 "did not see", кончилось "it ended"
    assert harmful["adult"]["ko"].explicit.count("나는 그 영화를 보지 않았다.")[0] == 0
    assert harmful["adult"]["ru"].explicit.count("Всё кончилось хорошо.")[0] == 0


def test_every_labelled_page_is_decided_by_its_stage():
    stages = parse_stages([{"include": "safety.yaml"}], str(ROOT / "configs" / "pipeline"))
    result, _ = run_stages(stages, _table(PAGES))
    got = dict(zip(result.dropped.column("id").to_pylist(), result.dropped.column("drop_reason").to_pylist()))
    for page in PAGES:
        assert got.get(page["id"]) == page["harmful"], page["id"]


def test_without_a_language_column_all_lists_apply():
    out, reasons = HarmfulContent().process(_table(PAGES, with_lang=False))
    for page, reason in zip(PAGES, reasons):
        assert (reason is not None) == (page["harmful"] is not None), page["id"]
    assert all(s >= 0 for s in out.column("harm_score").to_pylist())


@pytest.fixture(scope="module")
def whole_pipeline_fates() -> tuple[set[str], dict[str, str]]:
    """The pages through the whole pipeline: the ids kept and each dropped id's reason."""
    stages = parse_stages(PIPELINE, str(ROOT / "configs" / "pipeline"))
    result, _ = run_stages(stages, _table(PAGES, with_lang=False))
    kept = set(result.kept.column("id").to_pylist())
    return kept, dict(zip(result.dropped.column("id").to_pylist(), result.dropped.column("drop_reason").to_pylist()))


def test_real_prose_survives_the_whole_pipeline(whole_pipeline_fates):
    kept, reasons = whole_pipeline_fates
    assert kept == {p["id"] for p in PAGES if p["harmful"] is None}, reasons


def test_harmful_pages_are_removed_by_the_safety_stage_made_for_them(whole_pipeline_fates):
    _, reasons = whole_pipeline_fates
    # harmful pages are removed by the safety stage made for them, not by a quality rule's luck
    assert {i: r for i, r in reasons.items()} == {p["id"]: p["harmful"] for p in PAGES if p["harmful"]}


def test_contact_count_counts_contact_spam_not_years():
    assert contact_count(fold("联系电话：010-12345678")) == 0  # a phone number once is a contact page
    assert contact_count(fold("加微信：abc12345，QQ：12345678，tel 13812345678 / 13812345678")) == 4
    assert contact_count(fold("Telegram: @best_casino_777 t.me/best_casino_777")) == 2
    assert contact_count("Born 1896 1897 1898, then 1896 1897 1898.") == 0  # years are not phones
    assert contact_count(fold("Звоните: +7 (999) 123-45-67, +7 (999) 123-45-67")) == 2


def test_title_stuffing_measures_keyword_titles_not_sentences():
    assert title_stuffing("澳门赌场_澳门赌场官网_澳门赌场app_澳门赌场注册") == 1.0
    assert title_stuffing("长江 - 维基百科，自由的百科全书") == 0.0
    assert title_stuffing("News | Sport | Weather | Culture") == 0.25
    sentence = "Ang Kalakhang Tokyo, kasama ang Tokyo, ang Tokyo at ang Tokyo, ay ang pinakamalaking lugar sa Tokyo"
    assert title_stuffing(sentence) == 0.0  # long comma-separated segments: a sentence, not keywords


def test_languages_without_lists_are_not_scored():
    out, reasons = HarmfulContent().process(
        pa.table({"id": ["0"], "text": ["Sex anni, anal nude est."], "lang": ["la"]})
    )
    assert reasons == [None] and out.column("harm_adult").to_pylist() == [None]


def test_harm_thresholds_are_configured_per_language():
    page = next(p for p in PAGES if p["id"] == "zh-news-gambling-crackdown")
    table = _table([page])
    assert HarmfulContent().process(table)[1] == [None]
    strict = HarmfulContent(thresholds={"gambling": {"zh": 0.01}})
    assert strict.process(table)[1] == ["harmful:gambling"]
    assert HarmfulContent(action="annotate", thresholds={"gambling": {"zh": 0.01}}).process(table)[1] == [None]


def test_the_shipped_url_lists_match_subdomains(tmp_path):
    assert UrlFilter().reason_for("http://www.example-adult-site.cn/x", load_categories((str(tmp_path),), None)) is None
    shipped = UrlFilter()._lists()
    assert len(shipped["ut1"].domains) > 300_000
    sub = "m." + next(iter(_first_shipped_domain()))
    assert UrlFilter().reason_for(f"https://{sub}/page", shipped) == "url_blocklist:ut1"  # subdomains match


def test_url_lists_are_read_from_a_tarball_of_either_layout(tmp_path):
    import tarfile

    # a datatrove-style tarball (domains at the top) and an official UT1 one (blacklists/<category>/)
    (tmp_path / "domains").write_text("bad-casino.example\n")
    (tmp_path / "blacklists" / "phishing").mkdir(parents=True)
    (tmp_path / "blacklists" / "phishing" / "domains").write_text("login-bank.example\n")
    archive = tmp_path / "lists.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "domains", "domains")
        tar.add(tmp_path / "blacklists", "blacklists")
    stage = UrlFilter(blocklists=[str(archive)], categories=None, use_default_lists=False)
    lists = stage._lists()
    assert stage.reason_for("http://www.bad-casino.example/", lists) == "url_blocklist:ut1"
    assert stage.reason_for("http://secure.login-bank.example/a", lists) == "url_blocklist:phishing"
    assert stage.reason_for("http://bank.example/", lists) is None
    assert not DomainSet([]).any_of(["a.b"])


def _first_shipped_domain():
    import gzip

    with gzip.open(
        ROOT / "dataprep" / "assets" / "safety" / "blocklists" / "ut1" / "domains.gz", "rt", encoding="utf-8"
    ) as fh:
        for line in fh:
            if not line.startswith("#"):
                yield line.strip()
                return


@pytest.mark.parametrize("lang", ["zh", "ja", "ko", "ru", "de", "fr", "es", "en"])
def test_lists_ship_for_every_language(lang):
    for folder in ("toxic_words", "harmful/adult", "harmful/gambling"):
        assert (ROOT / "dataprep" / "assets" / "safety" / folder / f"{lang}.txt").is_file()
