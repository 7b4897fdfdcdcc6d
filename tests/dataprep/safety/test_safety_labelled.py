"""Adult content on the labelled pages of every shipped language (tests/data/safety_labelled.jsonl):
every explicit page is dropped by harmful_content, long fiction included, and no benign page is, not
even the medical, sex-education and court-news ones; the tiers and the densest window behave as
harmful.py says. Figures: docs/safety.md."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from dataprep.core.config import parse_stages
from dataprep.core.runner import run_stages
from dataprep.safety.harmful import HarmfulContent, densest_window, load_category_lists, vocabulary_signals
from dataprep.safety.word_lists import prepare, tokens_of

ROOT = Path(__file__).resolve().parents[3]
PAGES = [
    json.loads(line)
    for line in (ROOT / "tests" / "data" / "safety_labelled.jsonl").read_text(encoding="utf-8").splitlines()
    if line.strip()
]
LANGS = ["zh", "ja", "ko", "ru", "de", "fr", "es", "en"]


def _table(pages: list[dict]) -> pa.Table:
    return pa.table({
        "id": [p["id"] for p in pages],
        "url": [p.get("url", "") for p in pages],
        "title": [p.get("title") for p in pages],
        "text": [p["text"] for p in pages],
        "lang": [p.get("lang") for p in pages],
    })  # fmt: skip


def _safety_reasons(pages: list[dict]) -> dict[str, str]:
    stages = parse_stages([{"include": "safety.yaml"}], str(ROOT / "configs" / "pipeline"))
    result, _ = run_stages(stages, _table(pages))
    if not result.dropped.num_rows:
        return {}
    return dict(zip(result.dropped.column("id").to_pylist(), result.dropped.column("drop_reason").to_pylist()))


def test_the_set_covers_every_shipped_language_with_hard_negatives():
    counts = Counter((p["lang"], p["label"]) for p in PAGES)
    for lang in LANGS:
        assert counts[(lang, "explicit")] >= 3 and counts[(lang, "benign")] >= 4, lang
    kinds = {p["kind"] for p in PAGES if p["label"] == "benign"}
    assert {"medical", "sex-education", "news-legal", "news-culture", "forum"} <= kinds
    assert all(p["source"] for p in PAGES)


@pytest.fixture(scope="module")
def safety_reasons() -> dict[str, str]:
    return _safety_reasons(PAGES)


def test_every_explicit_page_is_dropped_by_the_adult_signal(safety_reasons):
    assert {p["id"]: safety_reasons.get(p["id"]) for p in PAGES if p["label"] == "explicit"} == {
        p["id"]: "harmful:adult" for p in PAGES if p["label"] == "explicit"
    }


def test_no_benign_page_is_dropped(safety_reasons):
    assert [p["id"] for p in PAGES if p["label"] == "benign" and p["id"] in safety_reasons] == []


def test_long_fiction_is_caught_by_the_densest_window_not_the_page_share():
    stage = HarmfulContent()
    lists = load_category_lists(True, ())["adult"]
    long_pages = [p for p in PAGES if p["id"].endswith("-explicit-fiction-long")]
    assert len(long_pages) == len(LANGS)
    for p in long_pages:
        prepared = prepare(p["text"])
        tokens = tokens_of(prepared)
        page, _ = vocabulary_signals(lists[p["lang"]], prepared, tokens, 10**12, stage.ambiguous_weight)
        window, _ = vocabulary_signals(lists[p["lang"]], prepared, tokens, stage.window_tokens, stage.ambiguous_weight)
        threshold = stage.threshold("adult", p["lang"])
        assert page < threshold <= window, (p["id"], page, window)


def test_medical_and_educational_pages_score_zero():
    out, _ = HarmfulContent(action="annotate").process(
        _table([p for p in PAGES if p["kind"] in ("medical", "sex-education")])
    )
    assert set(out.column("harm_adult").to_pylist()) == {0.0}
    assert set(out.column("harm_adult_terms").to_pylist()) == {0}


def test_ambiguous_entries_count_only_beside_two_explicit_ones():
    tiers = load_category_lists(True, ())["adult"]["zh"]
    anatomy = "阴茎 阴道 射精 精液 性交。" * 20
    assert vocabulary_signals(tiers, prepare(anatomy), tokens_of(prepare(anatomy)), 200, 0.5) == (0.0, 0)
    explicit = anatomy + "肉棒 小穴"
    density, distinct = vocabulary_signals(tiers, prepare(explicit), tokens_of(prepare(explicit)), 200, 0.5)
    assert distinct == 2 and density > 0.3


def test_densest_window_counts_the_cluster():
    # ten one-token matches in the first 100 of 1,000 tokens (one character each): 10 in a 200 window
    matches = [(i * 10, 1.0) for i in range(10)]
    assert densest_window(matches, chars=1000, tokens=1000, window=200) == pytest.approx(10 / 200)
    assert densest_window(matches, chars=1000, tokens=150, window=200) == 0.0  # shorter than a window


def test_lexicons_have_real_coverage_in_tiers():
    lists = load_category_lists(True, ())["adult"]
    folder = ROOT / "dataprep" / "assets" / "safety" / "harmful" / "adult"
    sizes = {
        lang: sum(
            1
            for line in (folder / f"{lang}.txt").read_text(encoding="utf-8").splitlines()
            if line and not line.startswith("#")
        )
        for lang in LANGS
    }
    assert sizes["zh"] >= 250 and sizes["en"] >= 200 and min(sizes.values()) >= 30, sizes
    for lang in LANGS:
        assert lists[lang].ambiguous is not None and (folder / "ambiguous" / f"{lang}.txt").is_file()
    assert lists["zh"].explicit.count("出口交易和水乳交融")[0] == 0  # entries inside common words were moved out


def test_real_text_from_shared_data_is_not_flagged(shared_data):
    """The lingua sentences (75 languages, pages of 20) and the Common Crawl documents: none is dropped."""
    import gzip

    data = shared_data
    by_lang: dict[str, list[str]] = {}
    for line in (data / "langid" / "lingua-sentences-75langs-300each.jsonl").open(encoding="utf-8"):
        row = json.loads(line)
        by_lang.setdefault(row["lang"], []).append(row["text"])
    pages = [
        {"id": f"{lang}-{i}", "text": "\n".join(t[i : i + 20]), "lang": lang}
        for lang, t in by_lang.items()
        for i in range(0, len(t), 20)
    ]
    for path in sorted((data / "documents").glob("*")):
        with (gzip.open if path.suffix == ".gz" else open)(path, "rt", encoding="utf-8") as fh:
            pages += [
                {"id": f"{path.name}-{i}", "text": json.loads(line)["text"], "lang": "en"} for i, line in enumerate(fh)
            ]
    assert len(pages) > 1000
    assert _safety_reasons(pages) == {}
