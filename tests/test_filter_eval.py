"""Both quality presets on the labelled pages (tests/data/filter_eval.jsonl): the share of good pages
each keeps and the bad pages each lets through. The figures are pinned so a rule change that costs
good pages or lets spam in shows up here; bench/filter_eval.py prints the per-rule table."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from dataprep.quality.c4 import C4Quality
from dataprep.quality.gopher import GopherQuality, GopherRepetition

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("filter_eval", ROOT / "bench" / "filter_eval.py")
filter_eval = importlib.util.module_from_spec(_spec)
sys.modules["filter_eval"] = filter_eval  # its dataclass looks its module up
_spec.loader.exec_module(filter_eval)


@pytest.fixture(scope="module")
def pages(shared_data):
    return filter_eval.load_eval_set(shared_data)


def test_labelled_set_is_whole(pages):
    assert len(pages) == 333
    assert sum(p["label"] == "good" for p in pages) == 277
    assert all(p["text"] for p in pages)


@pytest.mark.parametrize("preset, good_kept, bad_kept", [("fineweb_filters", 197, 11), ("ccpretrain_filters", 254, 11)])
def test_preset_figures(pages, preset, good_kept, bad_kept):
    score = filter_eval.score(preset, filter_eval.load_preset(preset), pages)
    assert (score.good_kept, score.bad_kept) == (good_kept, bad_kept)


def test_new_preset_keeps_more_good_pages_and_no_more_bad(pages):
    parity, ours = (filter_eval.score(p, filter_eval.load_preset(p), pages) for p in ("fineweb_filters", "ccpretrain_filters"))
    assert ours.retention > parity.retention and ours.bad_kept <= parity.bad_kept
    assert ours.good_dropped["gopher_quality:gopher_below_alpha_threshold"] < parity.good_dropped["gopher_quality:gopher_below_alpha_threshold"]


def test_rule_hits_lists_every_rule_that_fires():
    text = "\n".join(["Buy cheap pills now, cheap pills online, cheap pills here."] * 20)
    hits = filter_eval.rule_hits([GopherRepetition(), GopherQuality(), C4Quality()], text, "en")
    assert "gopher_repetition:dup_line_frac" in hits and "gopher_repetition:dup_para_char_frac" not in hits
    assert any(h.startswith("gopher_repetition:top_") for h in hits)


def test_numbers_count_as_words_only_when_asked():
    report = "Rovers beat City 3-2 on 12 May, and the 18,412 fans with tickets at $25.50 had to wait. " * 8
    assert GopherQuality().decide(report, "en")[0] == "gopher_below_alpha_threshold"
    assert GopherQuality(alpha_words="whitespace", alpha_counts_numbers=True).decide(report, "en")[0] is None


def test_keyword_stuffing_and_navigation_residue():
    stuffed = " ".join(["Cheap plumber in Springfield, the best Springfield plumber for Springfield homes."] * 8)
    assert GopherRepetition(max_top_word_frac=0.08).decide(stuffed, "en")[0] == "top_word"
    prose = "\n".join([
        "The river rises in the hills north of the town and reaches the sea after forty miles.",
        "Mills were built along its banks in the eighteenth century to grind grain and full cloth.",
        "By 1850 the town had grown around a bridge that carried the main road across the water.",
        "Floods in the winter of 1894 destroyed that bridge and several houses near the quay.",
        "A stone bridge replaced it three years later, paid for by a subscription among merchants.",
        "Today walkers follow a path beside the river from the old mill to the estuary marshes.",
    ])
    with_menus = prose.replace("\n", "\nShare\nReply\n")
    assert GopherRepetition().decide(with_menus, "en")[0] is not None  # FineWeb's rule counts the menus
    assert GopherRepetition(min_line_words=4).decide(with_menus, "en")[0] is None
