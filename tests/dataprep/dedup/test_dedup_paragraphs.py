"""Paragraph/line dedup on real text: trafilatura-eval's boilerplate snippets planted across real
documents and annotated main text are cut; lines held by few documents stay; Spark agrees with the
in-memory run for any partitioning."""

from __future__ import annotations

import random
from collections import defaultdict

import pytest

from dataprep.dedup.normalize import normalize
from dataprep.dedup.paragraphs import REASON, ParagraphDedup, split_segments
from dedup_corpus import doc_table, eval_pages, real_documents

BOILERPLATE_COPIES = 12


@pytest.fixture(scope="module")
def planted(shared_data):
    """(documents, boilerplate lines): real documents and trafilatura-eval main text (one page's
    snippets a document), with three real boilerplate snippets inserted as lines into 12 each."""
    pages = eval_pages(shared_data)
    docs = {f"real-{i:02d}": t for i, t in enumerate(real_documents(shared_data))}
    docs.update({f"page-{i:03d}": "\n".join(p["with"]) for i, p in enumerate(pages) if len(p["with"]) >= 2})
    snippets = sorted({s for p in pages for s in p["without"] if len(s) >= 50})
    rng = random.Random(5)
    boilerplate = rng.sample(snippets, 3)
    for line in boilerplate:
        for doc in rng.sample(sorted(docs), BOILERPLATE_COPIES):
            lines = docs[doc].split("\n")
            lines.insert(rng.randrange(len(lines) + 1), line)
            docs[doc] = "\n".join(lines)
    docs["only-boilerplate"] = "\n".join(boilerplate)
    return docs, boilerplate


def _holders(docs: dict[str, str]) -> dict[str, set[str]]:
    """Normalized line -> the documents holding it (the reference the stage must reproduce)."""
    held = defaultdict(set)
    for doc, text in docs.items():
        for line in text.split("\n"):
            if normalize(line):
                held[normalize(line)].add(doc)
    return held


def _texts(result) -> dict[str, str]:
    return dict(zip(result.kept.column("id").to_pylist(), result.kept.column("text").to_pylist()))


def test_paragraph_dedup_cuts_exactly_the_lines_held_by_too_many_documents(planted):
    docs, boilerplate = planted
    stage = ParagraphDedup(keep="none", max_documents=5, min_remaining_chars=20)
    result = stage.run_local(doc_table(docs))
    kept = _texts(result)
    assert dict(zip(result.dropped.column("id").to_pylist(), result.dropped.column("drop_reason").to_pylist())) == {
        "only-boilerplate": REASON
    }
    assert not any(line in text for text in kept.values() for line in boilerplate)
    held = _holders(docs)
    for doc, text in kept.items():  # exactly the lines held by at most 5 documents remain, in order
        expected = [line for line in docs[doc].split("\n") if len(held.get(normalize(line), ())) <= 5]
        assert [line for line in text.split("\n") if normalize(line)] == [
            line for line in expected if normalize(line)
        ], doc
    untouched = [d for d in kept if all(len(held.get(normalize(line), ())) <= 5 for line in docs[d].split("\n"))]
    assert len(untouched) > 100 and all(kept[d] == docs[d] for d in untouched)  # byte for byte
    counters = stage.take_counters()
    cut = sum(1 for d in kept if kept[d] != docs[d]) + 1
    assert counters["documents_changed"] == cut >= 3 * BOILERPLATE_COPIES
    assert counters["duplicated_segments"] == sum(1 for docs_ in held.values() if len(docs_) > 5) >= 3


def test_keep_first_leaves_one_copy_with_the_smallest_id(planted):
    docs, boilerplate = planted
    kept = _texts(ParagraphDedup(min_remaining_chars=0).run_local(doc_table(docs)))
    for line in boilerplate:
        holders = sorted(d for d, t in docs.items() if line in t.split("\n"))
        assert [d for d in holders if line in kept[d]] == [holders[0]]


def test_sentence_spans_cut_a_repeated_passage_but_not_a_shorter_one(shared_data):
    sentences = ["The committee met on Tuesday to review the annual budget.",
                 "Members raised concerns about rising maintenance costs.",
                 "A final decision was postponed until the spring meeting."]  # fmt: skip
    texts = real_documents(shared_data)[::10]  # one document from each file: no site in common
    docs = {f"d{i}": t + "\n" + " ".join(sentences) for i, t in enumerate(texts[:3])}
    docs["partial"] = texts[3] + "\n" + " ".join(sentences[:2])  # two of the three: no span in common
    docs["other"] = texts[4]
    result = ParagraphDedup(unit="sentence", span=3, min_remaining_chars=0).run_local(doc_table(docs))
    kept = _texts(result)
    assert kept["d0"] == docs["d0"] and kept["partial"] == docs["partial"] and kept["other"] == docs["other"]
    for doc in ("d1", "d2"):
        assert kept[doc] == texts[int(doc[1])].rstrip()  # the passage and the line break before it


def test_segments_rebuild_the_text():
    text = "Title\n\nFirst paragraph.\nStill first.\n\n\nSecond. 第二段。结束！\n"
    for unit in ("line", "paragraph", "sentence"):
        segments, separators = split_segments(text, unit)
        assert "".join(s + sep for s, sep in zip(segments, separators + [""])) == text
    assert split_segments(text, "paragraph")[0] == [
        "Title",
        "First paragraph.\nStill first.",
        "Second. 第二段。结束！\n",
    ]


@pytest.mark.parametrize("broadcast", [True, False], ids=["broadcast", "shuffle-join"])
def test_spark_matches_local_for_any_partitioning(spark, planted, monkeypatch, broadcast):
    from pipelines import global_runners
    from pipelines.global_runners import run_global

    if not broadcast:  # more cuts than a broadcast may carry: the documents are joined by a shuffle
        monkeypatch.setattr(global_runners, "BROADCAST_ROWS", 0)
    docs, _ = planted
    table = doc_table(docs)
    local_stage = ParagraphDedup(keep="none", max_documents=5)
    local = local_stage.run_local(table)
    local_counters = local_stage.take_counters()
    expected = {
        **{i: (t, None) for i, t in _texts(local).items()},
        **{
            i: (None, r)
            for i, r in zip(local.dropped.column("id").to_pylist(), local.dropped.column("drop_reason").to_pylist())
        },
    }
    df = spark.createDataFrame(table.to_pandas())
    for partitions in (1, 4):
        stage = ParagraphDedup(keep="none", max_documents=5)
        out = run_global(df.repartition(partitions), stage)
        assert (
            "BroadcastHashJoin" if broadcast else "SortMergeJoin"
        ) in out._jdf.queryExecution().executedPlan().toString()
        rows = out.collect()
        assert {r.id: (None if r.drop_reason else r.text, r.drop_reason) for r in rows} == expected
        assert all(r.drop_stage == "paragraph_dedup" for r in rows if r.drop_reason)
        assert stage.take_counters() == local_counters
