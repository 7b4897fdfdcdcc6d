"""The new dedup stages in a whole `dataprep run` on Spark: decontamination, URL and paragraph dedup
and an indexed exact dedup give the same corpus as the in-memory run of the same stages."""

from __future__ import annotations

import json
import random

import pyarrow.parquet as pq

from dataprep.core.config import load_config
from dataprep.core.runner import run_stages
from dedup_corpus import doc_table, eval_pages, real_documents
from pipelines.pipeline_run import run_pipeline


def test_dedup_stages_in_a_pipeline_match_the_in_memory_run(spark, shared_data, tmp_path):
    texts = real_documents(shared_data)
    pages = eval_pages(shared_data)
    boilerplate = sorted({s for p in pages for s in p["without"] if len(s) >= 50})[:2]
    rng = random.Random(2)
    docs = []
    for i, text in enumerate(texts[:40]):
        lines = text.split("\n")
        if i % 3 == 0:
            lines.insert(1, boilerplate[i % 2])
        docs.append(
            {
                "id": f"d{i:02d}",
                "url": f"https://site{i % 7}.example/page/{i}",
                "date": f"2024-03-{10 + i % 9}T00:00:00Z",
                "text": "\n".join(lines),
            }
        )
    for k in range(4):  # the same pages fetched again later, under another spelling of the URL
        docs.append(
            {
                **docs[k],
                "id": f"refetch{k}",
                "url": docs[k]["url"].replace("https://", "http://www.") + "/",
                "date": "2024-04-01T00:00:00Z",
            }
        )
    docs.append({**docs[20], "id": "copy20", "url": "https://elsewhere.example/20"})
    rng.shuffle(docs)
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    evals = tmp_path / "eval.jsonl"
    evals.write_text(json.dumps({"id": "q1", "text": " ".join(texts[30].split()[100:140])}) + "\n", encoding="utf-8")
    stages = [
        {"stage": "decontaminate", "eval_sets": [str(evals)], "action": "flag"},
        {"stage": "url_dedup"},
        {"stage": "paragraph_dedup", "keep": "none", "max_documents": 3, "min_remaining_chars": 50},
        {"stage": "exact_dedup", "save_index": str(tmp_path / "index")},
    ]
    config = load_config(
        {"input": {"paths": [str(tmp_path / "in.jsonl")]}, "output": {"dir": str(tmp_path / "out")}, "stages": stages}
    )
    result = run_pipeline(config, spark=spark)
    corpus = {r["id"]: r for r in pq.read_table(result.corpus_dir).to_pylist()}

    table = doc_table(
        {d["id"]: d["text"] for d in docs}, {d["id"]: d["url"] for d in docs}, {d["id"]: d["date"] for d in docs}
    )
    local_stages = load_config({"stages": stages[:3] + [{"stage": "exact_dedup"}]}).stages
    (local, _) = run_stages(local_stages, table)
    assert {i: corpus[i]["text"] for i in corpus} == dict(
        zip(local.kept.column("id").to_pylist(), local.kept.column("text").to_pylist())
    )
    assert not any(line in r["text"] for r in corpus.values() for line in boilerplate)
    assert {f"refetch{k}" for k in range(4)} <= set(corpus) and not {f"d{k:02d}" for k in range(4)} & set(corpus)
    assert len({"copy20", "d20"} & set(corpus)) == 1 and corpus["d30"]["contaminated_by"] == "eval:q1"
    stats = {s["stage"]: s for s in json.loads((tmp_path / "out" / "stats.json").read_text())["stages"]}
    assert stats["url_dedup"]["dropped"] == {"url_duplicate": 4} and stats["exact_dedup"]["dropped"] == {
        "exact_duplicate": 1
    }
    assert stats["decontaminate"]["counters"] == {"contaminated_documents": 1}
    assert stats["paragraph_dedup"]["counters"]["segments_removed"] >= 2 * len(boilerplate)  # reached stats.json
    assert json.loads((tmp_path / "index" / "index.json").read_text())["rows"] == len(corpus)


def test_shipped_dedup_preset_cuts_boilerplate_and_repeated_spans(shared_data, tmp_path):
    """configs/pipeline/dedup_all.yaml, included by name as the README shows, on real documents: a
    boilerplate line planted in 12 of them is cut from all, a 3-sentence passage copied into a later
    document is kept only in the first, and a refetched URL keeps one copy."""
    (tmp_path / "job.yaml").write_text("stages:\n  - include: dedup_all.yaml\n")
    stages = load_config(str(tmp_path / "job.yaml")).stages
    assert [s.name for s in stages] == [
        "url_dedup",
        "paragraph_dedup",
        "paragraph_dedup",
        "exact_dedup",
        "minhash_dedup",
    ]
    assert (stages[1].unit, stages[1].keep, stages[2].unit, stages[2].span) == ("line", "none", "sentence", 3)
    texts = [t for t in real_documents(shared_data) if t.count(". ") >= 10][:24]
    banner = "We use cookies to improve your experience on our site and to show you relevant offers."
    passage = "The committee met on Tuesday. It approved the budget for next year. Members thanked the staff."
    docs = {f"d{i:02d}": (f"{banner}\n{t}" if i % 2 else t) for i, t in enumerate(texts)}
    docs["d03"] += "\n" + passage
    docs["d17"] = docs["d17"] + "\n" + passage
    urls = {d: f"https://site.example/{d}" for d in docs}
    docs["r05"], urls["r05"] = texts[5] + "\nUpdated.", "http://www.site.example/d05/"
    dates = {d: "2024-04-01T00:00:00Z" if d.startswith("r") else "2024-03-01T00:00:00Z" for d in docs}
    (result, _) = run_stages(stages, doc_table(docs, urls, dates))
    kept = dict(zip(result.kept.column("id").to_pylist(), result.kept.column("text").to_pylist()))
    assert "r05" in kept and "d05" not in kept
    assert not any(banner in t for t in kept.values())
    assert passage in kept["d03"] and passage not in kept["d17"]
    assert kept["d02"] == texts[2]  # nothing to cut: byte for byte
