"""The report's "Sources" section: documents and text per source kind and the funnel per source kind,
from a real Spark run mixing web documents with Wikipedia articles."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from dataprep.core.config import load_config
from pipelines.cli import main as dataprep
from pipelines.pipeline_run import run_pipeline

ARTICLE = " ".join(["The river flows through the old town and past the cathedral, built in the twelfth century."] * 8)


def _inputs(shared_data, folder) -> list[str]:
    """Real web documents (one too short for Gopher), and Wikipedia records: five articles, a stub, a copy."""
    web = [json.loads(line)["text"] for line in (shared_data / "documents/redpajama-c4-refined.jsonl").open()]
    web_docs = [{"id": f"web-{i}", "text": t} for i, t in enumerate(web)] + [{"id": "web-short", "text": "Buy now."}]
    wiki_docs = [{"id": f"wiki-{i}", "text": f"Article {i}\n\n{ARTICLE}", "source_kind": "wikipedia"} for i in range(5)]
    wiki_docs += [
        {"id": "wiki-stub", "text": "Stubville is a village.", "source_kind": "wikipedia"},
        {"id": "wiki-copy", "text": f"Article 0\n\n{ARTICLE}", "source_kind": "wikipedia"},
    ]
    paths = []
    for name, docs in (("web", web_docs), ("wiki", wiki_docs)):
        path = folder / f"{name}.jsonl"
        path.write_text("".join(json.dumps(d) + "\n" for d in docs))
        paths.append(str(path))
    return paths


def test_the_sources_section_breaks_the_corpus_down_by_source_kind(spark, shared_data, tmp_path, capsys):
    config = load_config(
        {
            "input": {"paths": _inputs(shared_data, tmp_path), "format": "jsonl"},
            "output": {"dir": str(tmp_path / "out")},
            "stages": [{"stage": "gopher_quality"}, {"stage": "wikipedia_quality"}, {"stage": "exact_dedup"}],
        }
    )
    result = run_pipeline(config, spark=spark)
    assert dataprep(["report", str(tmp_path / "out")]) == 0
    md = (tmp_path / "out/report/report.md").read_text()
    section = md.split("## Sources", 1)[1].split("\n## ", 1)[0]

    corpus = pq.read_table(result.corpus_dir, columns=["source_kind", "text"]).to_pylist()
    kept = {k: [r["text"] for r in corpus if r["source_kind"] == k] for k in ("web", "wikipedia")}
    assert len(kept["wikipedia"]) == 5
    for kind, texts in kept.items():
        chars = sum(len(t) for t in texts)
        assert f"| {kind} | {len(texts):,} | {100 * len(texts) / len(corpus):.1f}% | {chars:,} |" in section
    # the funnel per kind: the stub and the copy are Wikipedia's, Gopher's drops the web's (exact counts)
    web_in, gopher = len(kept["web"]) + result.stats[1].docs_dropped, result.stats[1]
    assert gopher.stage == "gopher_quality" and gopher.dropped["gopher_short_doc"] >= 1
    assert f"| web | gopher_quality | {web_in:,} | {len(kept['web']):,} | {gopher.docs_dropped:,} |" in section
    assert "| wikipedia | gopher_quality | 7 | 7 | 0 | 0.0% |  |" in section
    assert "| wikipedia | wikipedia_quality | 7 | 6 | 1 | 14.3% | stub 1 |" in section
    assert "| wikipedia | exact_dedup | 6 | 5 | 1 | 16.7% | exact_duplicate 1 |" in section
