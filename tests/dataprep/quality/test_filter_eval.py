"""Both quality presets on the labelled pages (tests/data/filter_eval.jsonl): the share of good pages
each keeps and the bad pages each lets through, on the tune half (where the preset was chosen) and the
held-out half. The figures are pinned so a rule change that costs good pages or lets spam in shows up
here; bench/quality/filter_eval.py prints the per-rule table."""

from __future__ import annotations

from collections import Counter

import pytest

from bench.quality import filter_eval
from dataprep.quality.c4 import C4Quality
from dataprep.quality.fineweb import FineWebQuality
from dataprep.quality.gopher import GopherQuality, GopherRepetition, collapse_doubled_lines


@pytest.fixture(scope="module")
def pages(shared_data):
    return filter_eval.load_eval_set(shared_data)


def test_labelled_set_is_whole_and_split_in_halves(pages):
    assert len(pages) == 333
    assert sum(p["label"] == "good" for p in pages) == 277
    assert all(p["text"] for p in pages)
    halves = Counter((p["label"], p["split"]) for p in pages)
    assert set(halves) == {(label, split) for label in ("good", "bad") for split in ("tune", "heldout")}
    assert abs(halves["good", "tune"] - halves["good", "heldout"]) <= 1 and halves["bad", "tune"] == halves["bad", "heldout"]
    by_url = {}
    for p in pages:  # a WARC record and its WET text are one page: never one in each half
        if p.get("url"):
            assert by_url.setdefault(p["url"], p["split"]) == p["split"], p["url"]


@pytest.mark.parametrize("preset, split, good_kept, bad_kept", [
    ("fineweb_filters", "tune", 100, 6), ("fineweb_filters", "heldout", 97, 5),
    ("ccpretrain_filters", "tune", 137, 3), ("ccpretrain_filters", "heldout", 134, 4),
])
def test_preset_figures(pages, preset, split, good_kept, bad_kept):
    score = filter_eval.score(preset, filter_eval.load_preset(preset), filter_eval.in_split(pages, split))
    assert (score.good_kept, score.bad_kept) == (good_kept, bad_kept)


def test_new_preset_keeps_more_good_pages_and_no_more_bad(pages):
    parity, ours = (filter_eval.score(p, filter_eval.load_preset(p), pages) for p in ("fineweb_filters", "ccpretrain_filters"))
    assert ours.retention >= 0.95 and ours.bad_kept < parity.bad_kept
    heldout = filter_eval.in_split(pages, "heldout")
    parity_heldout, ours_heldout = (filter_eval.score(p, filter_eval.load_preset(p), heldout) for p in ("fineweb_filters", "ccpretrain_filters"))
    assert ours_heldout.retention >= 0.95 and ours_heldout.bad_kept <= parity_heldout.bad_kept  # the goal, on pages it was not chosen on
    assert ours.good_dropped["gopher_quality:gopher_below_alpha_threshold"] < parity.good_dropped["gopher_quality:gopher_below_alpha_threshold"]
    assert ours.bad_only["quality_classifier:quality_score_below_threshold"] > 0  # the classifier earns its place


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


def test_doubled_lead_is_collapsed_but_spam_repeats_are_not():
    lead = "Seit 2019 waschen wir Lastwagen an der A31 in Rhede, auf vier Waschstraßen, an sieben Tagen der Woche."
    body = "Für Spezialfahrzeuge steht rund um die Uhr eine Waschstraße zur Selbstbedienung bereit, auch für " "Viehtransporter."
    page = "\n\n".join([lead, lead, body, "Anfahrt über die Ausfahrt Rhede, dann zwei Kilometer Richtung Norden."])
    assert collapse_doubled_lines(page).count(lead) == 1
    spam = "\n".join([lead] * 3 + [body])
    assert collapse_doubled_lines(spam) == spam  # three times is not a teaser
    assert GopherRepetition(collapse_doubled_lines=True).decide(spam, "de")[0] is not None
    assert FineWebQuality(char_duplicates_ratio=0.1).decide(page, "de")[0] == "char_dup_ratio"
    assert FineWebQuality(char_duplicates_ratio=0.1, dup_collapse_doubled=True).decide(page, "de")[0] is None


def test_ngram_repetition_waits_for_enough_words():
    title = "La perte des terres fertiles et les éléphants en Guinée-Conakry"
    short = f"{title} | Environnement\n\n{title}\n\nUne étude de l'Institut de recherche pour le développement à " "Dakar le montre."
    assert GopherRepetition().decide(short, "fr")[0].endswith(("_gram", "_n_grams"))
    assert GopherRepetition(min_ngram_words=100).decide(short, "fr")[0] is None


def test_short_lines_judged_by_characters():
    method = ("Haferdrink mit Haferflocken, Vanille und Zimt in einem Topf aufkochen und zehn Minuten quellen lassen. "
              "Nüsse trocken in einer Pfanne anrösten. Äpfel waschen, halbieren, entkernen und in kleine Würfel schneiden.")
    serve = "Den Brei mit den Äpfeln und den Nüssen in zwei Schalen anrichten, nach Belieben mit Zimt bestreuen und " "warm servieren."
    recipe = "\n".join(["300 ml", "80 g", "1 Prise", "3 EL", "2 EL", "Zutaten", method, serve])
    assert FineWebQuality().decide(recipe, "de")[0] == "short_line_ratio"
    assert FineWebQuality(short_line_share="chars", short_line_thr=0.5).decide(recipe, "de")[0] is None
    menu = "\n".join(["Startseite", "Impressum", "Datenschutz", "Kontakt", "Suche", "Zurück", "Wir verwenden Cookies auf dieser Website."])
    assert FineWebQuality(short_line_share="chars", short_line_thr=0.5).decide(menu, "de")[0] == "short_line_ratio"


def test_line_punctuation_judged_by_characters_and_sentences_held():
    article = "\n".join([
        "Sport", "Vereinsnachrichten", "12. März 2023", "Von Jana Petersen", "Lesezeit: 3 Minuten", "Teilen", "Drucken",
        "Die Jahreshauptversammlung des Turnvereins fand am Freitag im Gemeindehaus statt, rund sechzig "
        "Mitglieder kamen. "
        "Der Vorstand berichtete von einem Jahr mit mehr Kursen, einer neuen Halle und deutlich höheren "
        "Energiekosten. "
        "Die Kasse ist trotzdem ausgeglichen, der Beitrag bleibt gleich (Foto: Verein)",
        "Im Herbst beginnt ein Kurs für Kinder ab vier Jahren, Anmeldungen nimmt die Geschäftsstelle entgegen.",
    ])

    def few_stops(stage, text):
        return stage.decide(text, "de")[0] == "line_punct_ratio"

    assert few_stops(FineWebQuality(), article)  # 1 of 9 lines ends with a stop
    by_chars, holds = FineWebQuality(line_punct_share="chars"), FineWebQuality(line_punct_share="chars", line_punct_test="holds")
    assert not few_stops(by_chars, article)
    trailing = article.replace("entgegen.", "entgegen (Stand: März)")  # no line ends with a stop now
    assert few_stops(by_chars, trailing) and not few_stops(holds, trailing)
    listing = "\n".join(f"Wohnung mit {i} Zimmern, 3.5 km zum Zentrum, www.example.com/{i}, Preis {i * 100} EUR" for i in range(20))
    assert few_stops(holds, listing)
    assert [holds._ends_sentence(line) for line in ["Er sagte: „Ja.“", "(see above.)", "Done! 🎉", "version 3.5", "example.com"]] == [True, True, True, False, False]


def test_stop_words_of_an_unlisted_language():
    swedish = ("Kommunen bygger en ny skola i centrum som ska stå klar nästa höst. Arbetet börjar i maj, "
               "och under tiden flyttar eleverna till tillfälliga lokaler vid idrottsplatsen. ") * 4
    assert GopherQuality().decide(swedish, "sv")[0] == "gopher_enough_stop_words"  # judged by English's list
    assert GopherQuality(stop_words_unlisted="skip").decide(swedish, "sv")[0] is None
    english_words_missing = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor. " * 8
    assert GopherQuality(stop_words_unlisted="skip").decide(english_words_missing, "en")[0] == "gopher_enough_stop_words"
