"""Wikipedia / MediaWiki XML dumps: the reader (namespaces, redirects, disambiguation, wikitext to text,
bz2 and damage), the ``wikipedia_quality`` stage, and the ``wikipedia`` preset on Spark (one file or four,
and a rerun after a crash)."""

from __future__ import annotations

import bz2
import re
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dataprep.core.config import InputConfig, load_config
from dataprep.core.stage import DROP_REASON, concat
from dataprep.core.stats import StageStats
from dataprep.quality.wikipedia import WikipediaQuality
from dataprep.readers import detect_format, iter_documents
from dataprep.readers.wikipedia import wikitext_to_text
from pipelines.pipeline_run import run_pipeline
from resume import rerun_after_a_crash

SAMPLE = Path(__file__).resolve().parents[2] / "data/wikipedia/enwiki-sample-pages-articles.xml"
# Every prose sentence, section title and list item of the sample's articles.
PROSE = [
    "A lighthouse is a tower that shines a light to guide ships at sea.",
    "Lighthouses mark dangerous coastlines, hazardous shoals and safe entries to harbours.",
    "History",
    "The oldest known lighthouse stood at Alexandria in ancient Egypt.",
    "Early lights were open fires burning on hilltops.",
    "Later towers used oil lamps behind glass, and keepers trimmed the wicks through the night.",
    "Lenses",
    "The Fresnel lens made the beam visible for many miles & changed coastal navigation.",
    "- Fixed lights shine steadily.",
    "- Flashing lights turn on and off in a pattern.",
    "- Each pattern identifies one station.",
    "See also",
    "- Lightvessel",
    "Pebble Point is a small headland in Cornwall.",
    "Tides are the rise and fall of sea levels caused by the gravity of the Moon and the Sun.",
    "Most coasts see two high tides and two low tides each day.",
    "Prediction",
    "Tide tables give the times and heights of high and low water for a port.",
    "Sailors read them before entering shallow harbours, and fishermen plan their work around them.",
    "Spring tides come near the new and full moon, when the Sun and Moon pull in line.",
    "Neap tides come at the quarter moons, when the pulls partly cancel.",
]
MARKUP = (
    "{{",
    "}}",
    "[[",
    "]]",
    "<ref",
    "{|",
    "|}",
    "'''",
    "==",
    "Category",
    "thumb",
    "Phare",
    "Cape Light",
    "check the date",
)


def read_all(path, stats=None, **cfg) -> tuple[pa.Table, pa.Table]:
    results = list(iter_documents(str(path), InputConfig(**cfg), stats))
    return concat(r.kept for r in results), concat(r.dropped for r in results)


def reasons(dropped: pa.Table) -> Counter:
    return Counter(dropped.column(DROP_REASON).to_pylist()) if dropped.num_rows else Counter()


def split_pages(xml: str) -> tuple[str, list[str], str]:
    """The dump's head (siteinfo), its pages and its tail."""
    first, last = xml.index("  <page>"), xml.rindex("</page>\n") + len("</page>\n")
    pages = re.findall(r"  <page>.*?</page>\n", xml[first:last], flags=re.S)
    return xml[:first], pages, xml[last:]


def test_articles_become_plain_text_that_keeps_every_sentence():
    stats = StageStats("read")
    kept, dropped = read_all(SAMPLE, stats)
    assert kept.column("id").to_pylist() == ["enwiki-101", "enwiki-106", "enwiki-107"]
    assert kept.column("url").to_pylist()[0] == "https://en.wikipedia.org/wiki/Lighthouse"
    assert kept.column("date").to_pylist()[2] == "2024-03-02T08:30:00Z"
    assert set(kept.column("source_kind").to_pylist()) == {"wikipedia"}
    text = "\n".join(kept.column("text").to_pylist())
    assert [s for s in PROSE if s not in text] == []
    assert [m for m in MARKUP if m in text] == []
    assert "References" not in text  # a section emptied of its reference list loses its title
    assert reasons(dropped) == {"redirect": 1, "disambiguation": 1}
    assert stats.counters == {"records_skipped:namespace_1": 1, "records_skipped:namespace_10": 1}


def test_wikitext_edge_cases():
    text, disambiguation = wikitext_to_text("'''X''' may be:\n* [[X (band)]]\n{{Begriffsklärung}}")
    assert disambiguation
    text, _ = wikitext_to_text(
        "See [[:Category:Birds|birds]], [[Datei:a.png|mini|Bild]] and [https://e.org the site].\n__NOTOC__"
    )
    assert text == "See birds, and the site."


def _multistream_parts() -> list[bytes]:
    """Like the real multistream dumps: the head and first pages, then one bz2 stream per page."""
    head, pages, tail = split_pages(SAMPLE.read_text())
    streams = [bz2.compress((head + "".join(pages[:3])).encode())] + [bz2.compress(p.encode()) for p in pages[3:]]
    streams[-1] = bz2.compress((pages[-1] + tail).encode())
    return streams


def test_a_bz2_multistream_dump_reads_as_the_plain_one(tmp_path):
    plain, _ = read_all(SAMPLE)
    multistream = tmp_path / "enwiki-pages-articles-multistream.xml.bz2"
    multistream.write_bytes(b"".join(_multistream_parts()))
    assert detect_format(str(multistream)) == "wikipedia"
    kept, _ = read_all(multistream)
    assert kept.column("text").to_pylist() == plain.column("text").to_pylist()


def test_a_cut_multistream_dump_keeps_the_pages_before_the_cut(tmp_path):
    streams = _multistream_parts()
    cut = tmp_path / "cut.xml.bz2"  # the damage inside the stream of the last page (Tide)
    cut.write_bytes(b"".join(streams[:-1]) + streams[-1][: len(streams[-1]) // 2])
    kept, dropped = read_all(cut, format="wikipedia")
    assert kept.column("id").to_pylist() == ["enwiki-101", "enwiki-106"]
    assert reasons(dropped) == {"redirect": 1, "disambiguation": 1, "error:truncated": 1}


def test_a_malformed_page_loses_only_itself(tmp_path):
    head, pages, tail = split_pages(SAMPLE.read_text())
    plain, _ = read_all(SAMPLE)
    broken = tmp_path / "broken.xml"
    bad_page = "  <page>\n    <title>Broken</titel>\n    <ns>0</ns>\n  </page>\n"
    broken.write_text(head + pages[0] + bad_page + "".join(pages[1:]) + tail)
    kept, dropped = read_all(broken)
    assert kept.column("id").to_pylist() == plain.column("id").to_pylist()
    assert reasons(dropped) == {"redirect": 1, "disambiguation": 1, "error:malformed_record": 1}


def test_wikipedia_quality_drops_stubs_and_list_pages():
    lists = "List of lighthouses\n\n" + "\n".join(
        f"- Lighthouse number {i} on the northern coast of the island" for i in range(20)
    )
    kept, _ = read_all(SAMPLE)
    texts = kept.column("text").to_pylist() + [lists]
    verdicts = [WikipediaQuality().decide(t) for t in texts]
    assert verdicts == [None, "stub", None, "list_page"]


def test_wikipedia_preset_on_spark_same_corpus_from_one_or_four_files(spark, tmp_path):
    head, pages, tail = split_pages(SAMPLE.read_text())
    bad_page = "  <page>\n    <title>Broken</titel>\n  </page>\n"
    pages = pages + [bad_page]
    one = tmp_path / "one"
    four = tmp_path / "four"
    one.mkdir(), four.mkdir()
    (one / "enwiki-pages-articles.xml.bz2").write_bytes(bz2.compress((head + "".join(pages) + tail).encode()))
    for i in range(4):
        (four / f"enwiki-pages-articles{i}.xml").write_text(head + "".join(pages[i::4]) + tail)
    corpora = []
    for folder in (one, four):
        config = load_config(
            "wikipedia",
            overrides={
                "input": {"paths": [str(folder)], "format": "auto"},
                "output": {"dir": str(tmp_path / f"out-{folder.name}")},
            },
        )
        result = run_pipeline(config, spark=spark)
        stats = {s.stage: s for s in result.stats}
        assert stats["read"].dropped == {"redirect": 1, "disambiguation": 1, "error:malformed_record": 1}
        assert stats["wikipedia_quality"].dropped == {"stub": 1}
        corpora.append(corpus(result))
    assert corpora[0] == corpora[1]
    assert [r[0] for r in corpora[0]] == ["enwiki-101", "enwiki-107"]
    assert {r[2] for r in corpora[0]} == {"wikipedia"}

    assert corpus(rerun_after_a_crash(config, spark)) == corpora[1]  # killed with two of four files read


def corpus(result) -> list[tuple]:
    return sorted(
        (r["id"], r["text"], r["source_kind"], r["url"]) for r in pq.read_table(result.corpus_dir).to_pylist()
    )
