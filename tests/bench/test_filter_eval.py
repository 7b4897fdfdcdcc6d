"""Both quality presets on the labelled pages (tests/data/filter_eval.jsonl): the share of good pages
each keeps and the bad pages each lets through, on the tune half (where the preset was chosen) and the
held-out half. The figures are pinned so a rule change that costs good pages or lets spam in shows up
here; bench/quality/filter_eval.py prints the per-rule table."""

from __future__ import annotations

from collections import Counter

import pytest

from bench.quality import filter_eval
from dataprep.quality.c4 import C4Quality
from dataprep.quality.gopher import GopherQuality
from dataprep.quality.gopher_repetition import GopherRepetition


@pytest.fixture(scope="module")
def pages(shared_data):
    return filter_eval.load_eval_set(shared_data)


def test_labelled_set_is_whole(pages):
    assert len(pages) == 333
    assert sum(p["label"] == "good" for p in pages) == 277
    assert all(p["text"] for p in pages)


def test_labelled_set_is_split_in_halves(pages):
    halves = Counter((p["label"], p["split"]) for p in pages)
    assert set(halves) == {(label, split) for label in ("good", "bad") for split in ("tune", "heldout")}
    assert (
        abs(halves["good", "tune"] - halves["good", "heldout"]) <= 1
        and halves["bad", "tune"] == halves["bad", "heldout"]
    )
    by_url = {}
    for p in pages:  # a WARC record and its WET text are one page: never one in each half
        if p.get("url"):
            assert by_url.setdefault(p["url"], p["split"]) == p["split"], p["url"]


@pytest.mark.parametrize(
    "preset, split, good_kept, bad_kept",
    [
        ("fineweb_filters", "tune", 100, 6),
        ("fineweb_filters", "heldout", 97, 5),
        ("ccpretrain_filters", "tune", 137, 3),
        ("ccpretrain_filters", "heldout", 134, 4),
    ],
)
def test_preset_figures(pages, preset, split, good_kept, bad_kept):
    score = filter_eval.score(preset, filter_eval.load_preset(preset), filter_eval.in_split(pages, split))
    assert (score.good_kept, score.bad_kept) == (good_kept, bad_kept)


def test_new_preset_keeps_more_good_pages_and_no_more_bad(pages):
    parity, ours = (
        filter_eval.score(p, filter_eval.load_preset(p), pages) for p in ("fineweb_filters", "ccpretrain_filters")
    )
    assert ours.retention >= 0.95 and ours.bad_kept < parity.bad_kept
    heldout = filter_eval.in_split(pages, "heldout")
    parity_heldout, ours_heldout = (
        filter_eval.score(p, filter_eval.load_preset(p), heldout) for p in ("fineweb_filters", "ccpretrain_filters")
    )
    assert (
        ours_heldout.retention >= 0.95 and ours_heldout.bad_kept <= parity_heldout.bad_kept
    )  # the goal, on pages it was not chosen on
    assert (
        ours.good_dropped["gopher_quality:gopher_below_alpha_threshold"]
        < parity.good_dropped["gopher_quality:gopher_below_alpha_threshold"]
    )
    assert ours.bad_only["quality_classifier:quality_score_below_threshold"] > 0  # the classifier earns its place


def test_rule_hits_lists_every_rule_that_fires():
    text = "\n".join(["Buy cheap pills now, cheap pills online, cheap pills here."] * 20)
    hits = filter_eval.rule_hits([GopherRepetition(), GopherQuality(), C4Quality()], text, "en")
    assert "gopher_repetition:dup_line_frac" in hits and "gopher_repetition:dup_para_char_frac" not in hits
    assert any(h.startswith("gopher_repetition:top_") for h in hits)
