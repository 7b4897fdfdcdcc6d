"""Duplicates across sources keep the preferred source's copy: web pages that quote Wikipedia articles whole
or nearly whole, read beside the Wikipedia dump in one run; with ``priority: [wikipedia, web]`` exact and
MinHash dedup keep the Wikipedia article and remove the web copy (whose smaller id would win without the
list), on Spark as in memory, and stats.json counts the removals per pair of sources."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dataprep.core.config import InputConfig, load_config
from dataprep.core.runner import run_stages
from dataprep.core.stage import concat
from dataprep.readers import iter_documents
from pipelines.cli import main as dataprep_cli
from pipelines.pipeline_run import run_pipeline

pytestmark = pytest.mark.slow  # many processes or subprocess CLIs: scripts/test.sh --fast leaves it out

DUMP = Path(__file__).resolve().parents[1] / "data" / "wikipedia" / "enwiki-sample-pages-articles.xml"
CHROME = "Share this page. Home | About | Contact. Posted by the site editor."


def _articles():
    articles = concat(r.kept for r in iter_documents(str(DUMP), InputConfig(format="wikipedia")))
    rows = sorted((r for r in articles.to_pylist() if len((r["text"] or "").split()) > 80), key=lambda r: r["id"])
    assert len(rows) >= 2, "the sample dump needs two long articles"
    return rows[:2]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """The dump, and a JSONL of web pages: one quotes an article word for word, one with a line of site chrome
    added; their ids sort before the articles' (the smallest id is what a stage without a priority keeps)."""
    root = tmp_path_factory.mktemp("priority")
    exact, near = _articles()
    pages = [
        {"id": "0-web-exact", "url": "https://example.com/a", "text": exact["text"]},
        {"id": "0-web-near", "url": "https://example.com/b", "text": f"{near['text']}\n{CHROME}"},
        {"id": "0-web-own", "url": "https://example.com/c", "text": "A page of its own about gardening. " * 30},
    ]
    (root / "web.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pages))
    return root, [str(DUMP), str(root / "web.jsonl")], exact["id"], near["id"]


def _config(root: Path, inputs: list[str], name: str, priority: list[str]):
    stages = [
        {"stage": "exact_dedup", "priority": priority},
        {"stage": "minhash_dedup", "priority": priority, "threshold": 0.7},
    ]
    return load_config({"input": {"paths": inputs}, "output": {"dir": str(root / name)}, "stages": stages})


def test_the_preferred_sources_copy_is_kept_on_spark_with_removals_counted_by_pair(spark, mixed):
    root, inputs, exact_id, near_id = mixed
    result = run_pipeline(_config(root, inputs, "wiki-first", ["wikipedia", "web"]), spark=spark)
    kept = {r["id"]: r["source_kind"] for r in pq.read_table(result.corpus_dir).to_pylist()}
    assert {exact_id, near_id, "0-web-own"} <= set(kept) and not {"0-web-exact", "0-web-near"} & set(kept)
    stats = {s.stage: s for s in result.stats}
    assert stats["exact_dedup"].counters["cross_source:web->wikipedia"] == 1
    assert stats["minhash_dedup"].counters["cross_source:web->wikipedia"] == 1
    assert dataprep_cli(["report", result.output_dir]) == 0
    report = (Path(result.output_dir) / "report" / "report.md").read_text()
    assert "## Duplicates across sources" in report and "| minhash_dedup | web | wikipedia | 1 |" in report
    plain = run_pipeline(_config(root, inputs, "by-id", []), spark=spark)
    kept_by_id = {r["id"] for r in pq.read_table(plain.corpus_dir).to_pylist()}
    assert {"0-web-exact", "0-web-near"} <= kept_by_id and not {exact_id, near_id} & kept_by_id  # the list decided


def test_in_memory_dedup_keeps_the_same_copies(mixed):
    root, inputs, exact_id, near_id = mixed
    documents = concat(r.kept for path in inputs for r in iter_documents(path, InputConfig()))
    config = _config(root, inputs, "memory", ["wikipedia", "web"])
    result, stats = run_stages(config.stages, documents)
    kept = set(result.kept.column("id").to_pylist())
    assert {exact_id, near_id, "0-web-own"} <= kept and not {"0-web-exact", "0-web-near"} & kept
    assert sum(s.counters["cross_source:web->wikipedia"] for s in stats) == 2
