"""Signals mode's document stages in memory: every document stays, each stage's values and verdict sit under
its own position (two stages of one kind do not collide), a rewriting stage keeps the text it replaced,
and a replayed stage gives the verdict the stage itself gives, with stored or new thresholds."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dataprep.classify.langid import LanguageID
from dataprep.core.runner import run_stages
from dataprep.core.signals import AnnotatedStage, ReplayStage, replay_plan, signal_stages, unstored_columns
from dataprep.quality.c4 import C4Quality
from dataprep.quality.fineweb import FineWebQuality
from dataprep.quality.gopher import GopherQuality
from dataprep.quality.gopher_repetition import GopherRepetition
from dataprep.safety.pii import PiiScrubber
from quality_parity import build_texts

TEXTS = {
    "en": "The committee met on Tuesday to discuss the budget for the coming year and agreed on most points.",
    "de": "Der Ausschuss traf sich am Dienstag, um den Haushalt für das kommende Jahr zu besprechen.",
    "pii": "Write to jane.doe@example.com for the minutes of the meeting about the budget of the coming year.",
}


def _table() -> pa.Table:
    return pa.table({"id": list(TEXTS), "text": list(TEXTS.values())})


def test_every_document_stays_with_each_stages_values_under_its_position():
    stages = [LanguageID(languages=["en"], second_opinion="none"), LanguageID(languages=["de"], second_opinion="none")]
    result, stats = run_stages(signal_stages(stages), _table())
    rows = {r["id"]: r for r in result.kept.to_pylist()}
    assert set(rows) == set(TEXTS) and result.dropped.num_rows == 0
    assert rows["en"]["00_langid__reason"] is None and rows["en"]["01_langid__reason"] == "langid:en"
    assert rows["de"]["00_langid__reason"] == "langid:de" and rows["de"]["01_langid__reason"] is None
    assert rows["de"]["00_langid__lang"] == rows["de"]["01_langid__lang"] == "de"
    assert stats[0].counters["would_drop:langid:de"] == 1


def test_a_rewriting_stage_keeps_the_text_it_replaced():
    (annotated,) = signal_stages([PiiScrubber()])
    rows = {r["id"]: r for r in annotated.apply(_table()).kept.to_pylist()}
    assert "jane.doe@example.com" not in rows["pii"]["text"]
    assert rows["pii"]["original_text"] == TEXTS["pii"]
    assert rows["en"]["original_text"] is None  # unchanged: not stored twice


def test_a_replayed_stage_decides_as_the_stage_does_with_stored_or_new_thresholds():
    stage = LanguageID(languages=["en"], second_opinion="none")
    signals = AnnotatedStage(stage=stage, position=0).apply(_table()).kept
    for threshold in (0.65, 0.99999):
        changed = LanguageID(languages=["en"], second_opinion="none", threshold=threshold)
        (replay,), problems = replay_plan([{"name": "langid", "params": stage.model_dump(mode="json")}], [changed])
        assert problems == [] and isinstance(replay, ReplayStage) and replay.redecide == (threshold != 0.65)
        replayed = replay.apply(signals)
        direct = changed.apply(_table())
        assert sorted(replayed.kept.column("id").to_pylist()) == sorted(direct.kept.column("id").to_pylist())
        assert replayed.dropped.column("drop_reason").to_pylist() == direct.dropped.column("drop_reason").to_pylist()


def test_a_setting_the_signals_cannot_redecide_is_refused_by_name():
    stage = LanguageID(languages=["en"], second_opinion="none")
    changed = LanguageID(languages=["en"], second_opinion="none", max_chars=100)
    _, problems = replay_plan([{"name": "langid", "params": stage.model_dump(mode="json")}], [changed])
    assert len(problems) == 1 and problems[0].startswith("stages.0 (langid): max_chars changed")


@pytest.fixture(scope="module")
def web_pages(shared_data) -> pa.Table:
    """The shared data's real pages: documents of web corpora and the text of WARC and HTML pages."""
    texts = build_texts(shared_data)
    return pa.table({"id": [t["id"] for t in texts], "text": [t["text"] for t in texts]})


def _verdicts(result) -> dict[str, str | None]:
    kept = {i: None for i in result.kept.column("id").to_pylist()}
    return kept | dict(zip(result.dropped.column("id").to_pylist(), result.dropped.column("drop_reason").to_pylist()))


# Per stage: thresholds that move its decisions, and settings each set to a value stored for a kept document
# (which then lies exactly on it, so a strict and a non-strict comparison differ)
RULES = {
    "gopher_quality": (
        GopherQuality(),
        [
            {"min_doc_words": 300},
            {"max_doc_words": 800, "min_stop_words": 12},
            {"min_alpha_words_ratio": 0.9, "max_avg_word_length": 5.2},
        ],
        {
            "min_doc_words": "doc_words",
            "min_avg_word_length": "mean_word_length",
            "max_symbol_word_ratio": "hash_ratio",
            "max_bullet_lines_ratio": "bullet_lines_ratio",
            "max_ellipsis_lines_ratio": "ellipsis_lines_ratio",
            "min_alpha_words_ratio": "alpha_words_ratio",
            "min_stop_words": "stop_word_count",
        },
    ),
    "gopher_repetition": (
        GopherRepetition(),
        [
            {"dup_line_frac": 0.05, "top_n_grams": [[2, 0.05], [3, 0.18], [4, 0.16]]},
            {"max_top_word_frac": 0.02},
            {
                "dup_n_grams": [[5, 0.03], [6, 0.14], [7, 0.13], [8, 0.12], [9, 0.11], [10, 0.10]],
                "min_ngram_words": 400,
            },
        ],
        {
            "dup_para_frac": "dup_para_frac",
            "dup_line_char_frac": "dup_line_char_frac",
            "max_top_word_frac": "top_word_share",
            "top_n_grams": "top_2_gram_frac",
            "dup_n_grams": "dup_5_gram_frac",
        },
    ),
    "fineweb_quality": (
        FineWebQuality(),
        [{"line_punct_thr": 0.6}, {"short_line_thr": 0.2, "line_punct_exclude_zero": True}],
        {
            "line_punct_thr": "line_punct_ratio",
            "short_line_thr": "short_line_ratio",
            "char_duplicates_ratio": "char_dup_ratio",
            "new_line_ratio": "list_ratio",
        },
    ),
}


@pytest.mark.parametrize("name", sorted(RULES))
def test_a_rule_threshold_changed_after_signals_decides_as_a_fresh_run_with_it(web_pages, name):
    stage, changes, on_values = RULES[name]
    signals = AnnotatedStage(stage=stage, position=3).apply(web_pages).kept
    defaults = _verdicts(stage.apply(web_pages))
    assert _verdicts(ReplayStage(stage=stage, position=3, redecide=True).apply(signals)) == defaults
    changes = list(changes)
    for setting, column in on_values.items():
        kept = [
            v
            for v, reason in zip(
                signals.column(f"03_{name}__{column}").to_pylist(), signals.column(f"03_{name}__reason").to_pylist()
            )
            if reason is None
        ]
        values = sorted(v for v in kept if v)  # a document every rule judges lies on the new threshold
        value = values[len(values) // 2]
        if isinstance(getattr(stage, setting), list):  # n-gram rules: the first size's fraction
            value = [[n, value if i == 0 else frac] for i, (n, frac) in enumerate(getattr(stage, setting))]
        changes.append({setting: value})
    for change in changes:
        changed = type(stage)(**change)
        recorded = [{"name": stage.name, "params": stage.model_dump(mode="json")}] * 4
        plan, problems = replay_plan(recorded, [stage] * 3 + [changed])
        assert problems == [] and plan[3].redecide
        replayed, fresh = _verdicts(plan[3].apply(signals)), _verdicts(changed.apply(web_pages))
        assert replayed == fresh and fresh != defaults, change


def test_a_filter_needing_values_the_signals_run_did_not_store_is_refused_by_name():
    stage = GopherRepetition()
    changed = GopherRepetition(dup_n_grams=[[5, 0.15], [11, 0.1]])
    _, problems = replay_plan([{"name": stage.name, "params": stage.model_dump(mode="json")}], [changed])
    assert len(problems) == 1 and problems[0].startswith("stages.0 (gopher_repetition): dup_n_grams changed")
    assert "dup_11_gram_frac" in problems[0]


def test_c4s_stored_sentence_count_is_the_count_its_rule_compares(web_pages):
    signals = AnnotatedStage(stage=C4Quality(), position=4).apply(web_pages).kept
    rows = [
        (r["id"], r["04_c4_quality__sentences"])
        for r in signals.to_pylist()
        if r["04_c4_quality__reason"] in (None, "too_few_sentences")
    ]
    for minimum in (3, 8, 20):
        fresh = _verdicts(C4Quality(min_num_sentences=minimum).apply(web_pages))
        assert {i for i, n in rows if n < minimum} == {i for i, _ in rows if fresh[i] == "too_few_sentences"}, minimum


def test_signals_without_a_rules_values_are_refused_for_new_thresholds():
    signals = AnnotatedStage(stage=GopherQuality(), position=0).apply(_table()).kept
    replay = ReplayStage(stage=GopherQuality(min_doc_words=10), position=0, redecide=True)
    assert unstored_columns([replay], signals.schema) == []
    older = signals.drop_columns(["00_gopher_quality__doc_words"]).schema  # a signals run that did not store it
    (problem,) = unstored_columns([replay], older)
    assert problem.startswith("stages.0 (gopher_quality): the signals hold no 00_gopher_quality__doc_words")
