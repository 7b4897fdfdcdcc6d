"""Each heuristic rule on hand-made edge cases, non-English text, presets and the batch contract."""

from __future__ import annotations

import gzip
import json
import pickle
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from dataprep.core.config import ConfigError, load_config
from dataprep.quality.c4 import C4Quality
from dataprep.quality.fineweb import FineWebQuality
from dataprep.quality.gopher import GopherQuality
from dataprep.quality.gopher_repetition import GopherRepetition, NGrams, collapse_doubled_lines
from dataprep.quality.languages import count_sentences, split_words

ROOT = Path(__file__).resolve().parents[3]
PROSE = (
    "The committee met on Tuesday to discuss the new budget for the library and the park. "
    "Members agreed that the plan should be shared with residents before the vote, and that "
    "comments will be collected for two weeks. The chair said the city has to balance costs with "
    "the needs of families who use these places every day, and that the final report will be "
    "published next month with all of the figures included.\n"
    "Several people asked whether the park would stay open during the work. Officials replied that "
    "most paths will remain open, with short closures announced in advance on the city website."
)
EDGE_TEXTS = {
    "empty": "",
    "whitespace": " \n\t \n\n   ",
    "one_long_line": "word " * 30000,
    "one_giant_token": "x" * 200_000,
    "mixed_scripts": "Hello мир 世界 مرحبا שלום 🌍 नमस्ते. " * 20,
    "control_chars": "a\x00b\x01c\u200b\ufeff " * 50,
}
STAGES = [GopherQuality(), GopherRepetition(), C4Quality(), FineWebQuality()]


def _batch(texts: list[str | None]) -> pa.Table:
    return pa.table({"id": [str(i) for i in range(len(texts))], "text": pa.array(texts, pa.string())})


@pytest.mark.parametrize("stage", STAGES, ids=lambda s: s.name)
def test_edge_texts_get_a_reason_or_pass_without_error(stage):
    batch = _batch([*EDGE_TEXTS.values(), None])
    result = stage.apply(batch)
    assert result.kept.num_rows + result.dropped.num_rows == batch.num_rows
    reasons = result.dropped.column("drop_reason").to_pylist()
    assert not [r for r in reasons if r.startswith("error:")], reasons
    dropped_ids = set(result.dropped.column("id").to_pylist())
    assert {"0", "1", str(len(EDGE_TEXTS))} <= dropped_ids  # empty, whitespace-only and null texts go


def test_prose_passes_every_stage():
    text = "\n".join([PROSE] * 1)
    for stage in (GopherQuality(), C4Quality(min_num_sentences=3), FineWebQuality()):
        assert stage.decide(text, "en")[0] is None, stage.name
    assert GopherRepetition().decide(PROSE, "en")[0] is None


@pytest.mark.parametrize(
    "params, text, reason",
    [
        ({}, "only a few words here", "gopher_short_doc"),
        ({"max_doc_words": 60}, PROSE, "gopher_long_doc"),
        ({}, ("a an to of " * 30), "gopher_below_avg_threshold"),
        ({}, ("incomprehensibilities " * 60), "gopher_above_avg_threshold"),
        ({}, PROSE + " #tag" * 30, "gopher_too_many_hashes"),
        ({}, PROSE + " wait..." * 30, "gopher_too_many_ellipsis"),
        (
            {},
            "\n".join(f"- item {i} of the list with the words and that" for i in range(40)),
            "gopher_too_many_bullets",
        ),
        ({}, PROSE + "\n" + "\n".join(["and so it goes…"] * 10), "gopher_too_many_end_ellipsis"),
        ({}, PROSE + " 123 456 789 = 42 %" * 40, "gopher_below_alpha_threshold"),
        ({}, "lorem ipsum dolor sit amet consectetur adipiscing elit sed do " * 10, "gopher_enough_stop_words"),
        ({"min_stop_words": None}, "lorem ipsum dolor sit amet consectetur adipiscing elit sed do " * 10, None),
    ],
)
def test_gopher_quality_rules(params, text, reason):
    assert GopherQuality(**params).decide(text, "en")[0] == reason


@pytest.mark.parametrize(
    "text, reason",
    [
        ("\n\n".join(["The same paragraph again."] * 5 + [PROSE]), "dup_para_frac"),
        ("\n".join(["Click here to subscribe"] * 5 + ["x"] * 3 + [PROSE]), "dup_line_frac"),
        (PROSE + " buy cheap pills" * 80, "top_2_gram"),
        (" ".join(f"w{i}" for i in range(300)) * 3, "duplicated_5_n_grams"),
    ],
)
def test_gopher_repetition_rules(text, reason):
    assert GopherRepetition().decide(text, "en")[0] == reason


@pytest.mark.parametrize(
    "text",
    [
        PROSE,
        PROSE + " " + PROSE[: len(PROSE) // 3],
        " ".join(f"w{i % 7} v{i}" for i in range(200)),
        "a b c d e a b c d f a b c d e",
    ],
)
def test_repeated_n_gram_counts_do_not_depend_on_what_was_asked_before(text):
    """duplicate_chars stops looking beyond the first n with no repeated n-gram: every count is still
    the one a fresh instance gives, asked in any order."""
    words = split_words(text, "en")
    fresh = [NGrams(words).duplicate_chars(n) for n in range(2, 11)]
    ascending = NGrams(words)
    assert [ascending.duplicate_chars(n) for n in range(2, 11)] == fresh
    descending = NGrams(words)
    assert [descending.duplicate_chars(n) for n in range(10, 1, -1)][::-1] == fresh


@pytest.fixture
def c4_lines() -> list[str]:
    """A page of sentences behind boilerplate lines, a short line and a citation marker."""
    return [
        "Please enable JavaScript to view this page properly today.",
        "This site uses cookies to improve your experience.",
        "Menu",
        "Short line.",
        "The study found a clear effect of sleep on memory [12] in adults.",
        *[f"Sentence number {i} is a complete sentence." for i in range(5)],
    ]


def test_c4_rewrites_boilerplate_lines(c4_lines):
    reason, text = C4Quality().decide("\n".join(c4_lines), "en")
    assert reason is None
    assert "JavaScript" not in text and "cookies" not in text and "Menu" not in text and "Short line." not in text
    assert "memory  in adults." in text  # citation marker stripped, line kept


def test_c4_drops_documents_by_its_rules(c4_lines):
    lines = c4_lines
    assert C4Quality().decide("\n".join(lines + ["Lorem ipsum dolor sit amet."]), "en")[0] == "lorem_ipsum"
    assert C4Quality().decide("\n".join(lines + ["function f() { return 1; }."]), "en")[0] == "curly_bracket"
    assert C4Quality().decide("One sentence only here.", "en")[0] == "too_few_sentences"
    assert C4Quality(min_num_sentences=-1).decide("One sentence only here.", "en")[0] is None


def test_count_sentences_follows_sentencizer_rules():
    assert count_sentences("Mr. Smith paid $3.50 for it. Then he left! Why?") == 3
    assert count_sentences("Wait?! Really.") == 2
    assert count_sentences("no end mark") == 1


@pytest.mark.parametrize(
    "text, reason",
    [
        ("\n".join([f"no punctuation in line number {i} at all" for i in range(20)] + [PROSE]), "line_punct_ratio"),
        ("\n".join(["Short."] * 10 + [PROSE]), "short_line_ratio"),
        (PROSE + "\n" + "\n".join(["A repeated line that ends well."] * 3), "char_dup_ratio"),
        ("\n".join(f"Item {i}." for i in range(50)), "short_line_ratio"),
        ("\n".join(f"Pneumonoultramicroscopic{i} antidisestablishmentarianism." for i in range(30)), "list_ratio"),
    ],
)
def test_fineweb_rules(text, reason):
    assert FineWebQuality().decide(text, "en")[0] == reason


def test_word_split_matches_spacy_behaviour():
    assert split_words("Don't stop—it's Mr. Smith's 3.5km walk (well-known) at 5pm, see http://x.org/a?b=1.") == (
        "Do", "n't", "stop", "—", "it", "'s", "Mr.", "Smith", "'s", "3.5", "km", "walk", "(", "well", "-", "known", ")",
        "at", "5", "pm", ",", "see", "http://x.org/a?b=1", ".",
    )  # fmt: skip


@pytest.fixture(scope="module")
def lingua(shared_data):
    rows = [
        json.loads(line)
        for line in (shared_data / "langid" / "lingua-sentences-75langs-300each.jsonl").open(encoding="utf-8")
    ]
    return lambda lang, n=40: "\n".join([r["text"] for r in rows if r["lang"] == lang][:n])


def test_chinese_pages_are_not_dropped_for_too_few_words(lingua, shared_data):
    from resiliparse.extract.html2text import extract_plain_text

    page = (
        shared_data
        / "html"
        / "trafilatura-eval"
        / "pages"
        / "banyuetan.org.1000200033136171577956287380194268_1.html.gz"
    )
    article = extract_plain_text(gzip.decompress(page.read_bytes()).decode("utf-8", "replace"), main_content=True)
    for text in (lingua("zh"), article):
        assert len(split_words(text, "zh")) > 300
        for stage in (
            GopherQuality(language="zh"),
            GopherRepetition(language="zh"),
            FineWebQuality(language="zh"),
            C4Quality(language="zh"),
        ):
            assert stage.apply(_batch([text])).kept.num_rows == 1, stage.name
        # whitespace word splitting would have dropped it
        assert GopherQuality().decide(text, "en")[0] == "gopher_short_doc"


def test_language_auto_uses_lang_column(lingua):
    texts = [lingua("zh"), lingua("ja"), lingua("de")]
    batch = pa.table({"id": ["zh", "ja", "de"], "text": texts, "lang": ["zh", "ja", "de"]})
    result = GopherQuality(language="auto").apply(batch)
    assert result.kept.column("id").to_pylist() == ["zh", "ja", "de"]
    assert GopherQuality().apply(batch).kept.num_rows == 0  # English rules drop all three


def test_quality_presets_load():
    for name in ("fineweb_filters.yaml", "gopher_c4.yaml"):
        stages = yaml.safe_load((ROOT / "configs" / "pipeline" / name).read_text())["stages"]
        config = load_config({"stages": stages})
        assert [s.name for s in config.stages][:2] == ["gopher_repetition", "gopher_quality"]
    fineweb = load_config(
        {"stages": yaml.safe_load((ROOT / "configs/pipeline/fineweb_filters.yaml").read_text())["stages"]}
    )
    assert fineweb.stages[2].filter_no_terminal_punct is False


def test_an_unknown_quality_setting_is_a_config_error():
    with pytest.raises(ConfigError, match="min_doc_word"):
        load_config({"stages": [{"stage": "gopher_quality", "min_doc_word": 10}]})


def test_stages_pickle_for_spark():
    for stage in STAGES:
        clone = pickle.loads(pickle.dumps(stage))
        assert clone.decide(PROSE, "en") == stage.decide(PROSE, "en")


def test_numbers_count_as_words_only_when_asked():
    report = "Rovers beat City 3-2 on 12 May, and the 18,412 fans with tickets at $25.50 had to wait. " * 8
    assert GopherQuality().decide(report, "en")[0] == "gopher_below_alpha_threshold"
    assert GopherQuality(alpha_words="whitespace", alpha_counts_numbers=True).decide(report, "en")[0] is None


def test_keyword_stuffing_is_caught_by_the_top_word_rule():
    stuffed = " ".join(["Cheap plumber in Springfield, the best Springfield plumber for Springfield homes."] * 8)
    assert GopherRepetition(max_top_word_frac=0.08).decide(stuffed, "en")[0] == "top_word"


def test_navigation_residue_is_left_out_by_a_minimum_of_line_words():
    prose = "\n".join(
        [
            "The river rises in the hills north of the town and reaches the sea after forty miles.",
            "Mills were built along its banks in the eighteenth century to grind grain and full cloth.",
            "By 1850 the town had grown around a bridge that carried the main road across the water.",
            "Floods in the winter of 1894 destroyed that bridge and several houses near the quay.",
            "A stone bridge replaced it three years later, paid for by a subscription among merchants.",
            "Today walkers follow a path beside the river from the old mill to the estuary marshes.",
        ]
    )
    with_menus = prose.replace("\n", "\nShare\nReply\n")
    assert GopherRepetition().decide(with_menus, "en")[0] is not None  # FineWeb's rule counts the menus
    assert GopherRepetition(min_line_words=4).decide(with_menus, "en")[0] is None


def test_doubled_lead_is_collapsed_but_spam_repeats_are_not():
    lead = "Seit 2019 waschen wir Lastwagen an der A31 in Rhede, auf vier Waschstraßen, an sieben Tagen der Woche."
    body = (
        "Für Spezialfahrzeuge steht rund um die Uhr eine Waschstraße zur Selbstbedienung bereit, "
        "auch für Viehtransporter."
    )
    page = "\n\n".join([lead, lead, body, "Anfahrt über die Ausfahrt Rhede, dann zwei Kilometer Richtung Norden."])
    assert collapse_doubled_lines(page).count(lead) == 1
    spam = "\n".join([lead] * 3 + [body])
    assert collapse_doubled_lines(spam) == spam  # three times is not a teaser
    assert GopherRepetition(collapse_doubled_lines=True).decide(spam, "de")[0] is not None
    assert FineWebQuality(char_duplicates_ratio=0.1).decide(page, "de")[0] == "char_dup_ratio"
    assert FineWebQuality(char_duplicates_ratio=0.1, dup_collapse_doubled=True).decide(page, "de")[0] is None


def test_ngram_repetition_waits_for_enough_words():
    title = "La perte des terres fertiles et les éléphants en Guinée-Conakry"
    short = (
        f"{title} | Environnement\n\n{title}\n\n"
        "Une étude de l'Institut de recherche pour le développement à Dakar le montre."
    )
    assert GopherRepetition().decide(short, "fr")[0].endswith(("_gram", "_n_grams"))
    assert GopherRepetition(min_ngram_words=100).decide(short, "fr")[0] is None


def test_short_lines_judged_by_characters():
    method = (
        "Haferdrink mit Haferflocken, Vanille und Zimt in einem Topf aufkochen und zehn Minuten quellen lassen. "
        "Nüsse trocken in einer Pfanne anrösten. Äpfel waschen, halbieren, entkernen und in kleine Würfel schneiden."
    )
    serve = (
        "Den Brei mit den Äpfeln und den Nüssen in zwei Schalen anrichten, "
        "nach Belieben mit Zimt bestreuen und warm servieren."
    )
    recipe = "\n".join(["300 ml", "80 g", "1 Prise", "3 EL", "2 EL", "Zutaten", method, serve])
    assert FineWebQuality().decide(recipe, "de")[0] == "short_line_ratio"
    assert FineWebQuality(short_line_share="chars", short_line_thr=0.5).decide(recipe, "de")[0] is None
    menu = "\n".join(
        [
            "Startseite",
            "Impressum",
            "Datenschutz",
            "Kontakt",
            "Suche",
            "Zurück",
            "Wir verwenden Cookies auf dieser Website.",
        ]
    )
    assert FineWebQuality(short_line_share="chars", short_line_thr=0.5).decide(menu, "de")[0] == "short_line_ratio"


def test_line_punctuation_can_be_judged_by_characters_or_by_sentences_held():
    article = "\n".join(
        [
            "Sport",
            "Vereinsnachrichten",
            "12. März 2023",
            "Von Jana Petersen",
            "Lesezeit: 3 Minuten",
            "Teilen",
            "Drucken",
            "Die Jahreshauptversammlung des Turnvereins fand am Freitag im Gemeindehaus statt, "
            "rund sechzig Mitglieder kamen. "
            "Der Vorstand berichtete von einem Jahr mit mehr Kursen, einer neuen Halle "
            "und deutlich höheren Energiekosten. "
            "Die Kasse ist trotzdem ausgeglichen, der Beitrag bleibt gleich (Foto: Verein)",
            "Im Herbst beginnt ein Kurs für Kinder ab vier Jahren, Anmeldungen nimmt die Geschäftsstelle entgegen.",
        ]
    )

    def few_stops(stage, text):
        return stage.decide(text, "de")[0] == "line_punct_ratio"

    assert few_stops(FineWebQuality(), article)  # 1 of 9 lines ends with a stop
    by_chars, holds = (
        FineWebQuality(line_punct_share="chars"),
        FineWebQuality(line_punct_share="chars", line_punct_test="holds"),
    )
    assert not few_stops(by_chars, article)
    trailing = article.replace("entgegen.", "entgegen (Stand: März)")  # no line ends with a stop now
    assert few_stops(by_chars, trailing) and not few_stops(holds, trailing)
    listing = "\n".join(
        f"Wohnung mit {i} Zimmern, 3.5 km zum Zentrum, www.example.com/{i}, Preis {i * 100} EUR" for i in range(20)
    )
    assert few_stops(holds, listing)
    assert [
        holds._ends_sentence(line)
        for line in ["Er sagte: „Ja.“", "(see above.)", "Done! 🎉", "version 3.5", "example.com"]
    ] == [True, True, True, False, False]


def test_stop_words_of_an_unlisted_language():
    swedish = (
        "Kommunen bygger en ny skola i centrum som ska stå klar nästa höst. Arbetet börjar i maj, "
        "och under tiden flyttar eleverna till tillfälliga lokaler vid idrottsplatsen. "
    ) * 4
    assert GopherQuality().decide(swedish, "sv")[0] == "gopher_enough_stop_words"  # judged by English's list
    assert GopherQuality(stop_words_unlisted="skip").decide(swedish, "sv")[0] is None
    english_words_missing = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor. " * 8
    assert (
        GopherQuality(stop_words_unlisted="skip").decide(english_words_missing, "en")[0] == "gopher_enough_stop_words"
    )
