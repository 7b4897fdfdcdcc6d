"""Each whole-corpus stage is one definition (``GlobalStage``: prepare, decide, applier, complete) that
both runners execute: the in-memory runner, Spark on one DataFrame and a whole pipeline run give the
same documents, the same columns and the same counters on the same real corpus, at any partitioning."""

from __future__ import annotations

import json
import random
from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataprep.core.applier import Applier
from dataprep.core.config import load_config
from dataprep.core.stage import DOC_SCHEMA, DROP_REASON
from dataprep.dedup.exact import ExactDedup
from dataprep.dedup.minhash import MinHashDedup
from dataprep.dedup.paragraphs import ParagraphDedup
from dataprep.dedup.urls import UrlDedup
from dataprep.quality.top_fraction import TopFraction
from dataprep.tokenize.manifest import load_manifest
from dataprep.tokenize.shards import open_dataset
from dataprep.tokenize.stage import Tokenize
from dataprep.tokenize.tokenizer import Tokenizer
from dedup_corpus import eval_pages
from near_duplicates import base_documents, mutate


@pytest.fixture(scope="module")
def corpus(shared_data) -> pa.Table:
    """Real documents with planted exact copies (case and spacing changed), near copies (a few words in
    a hundred changed), copies under the same URL, shared boilerplate lines, a score and a language."""
    rng = random.Random(7)
    base = [t for t in base_documents(shared_data) if len(t.split()) >= 50][:160]
    vocab = sorted({w for t in base[:20] for w in t.split()})
    boiler = [b for page in eval_pages(shared_data)[:30] for b in page.get("without", []) if len(b) > 30][:12]
    ids, texts, urls, dates = [], [], [], []

    def add(doc_id: str, text: str, url: str, date: str = "2024-05-01T00:00:00Z") -> None:
        ids.append(doc_id), texts.append(text), urls.append(url), dates.append(date)

    for i, text in enumerate(base):
        lines = [text] + ([rng.choice(boiler) for _ in range(2)] if i % 3 == 0 else [])
        add(f"doc-{i:03d}", "\n".join(lines), f"https://site{i % 40}.example/page/{i}")
    for i in range(0, 40, 4):
        add(f"exact-{i:03d}", "  " + base[i].upper().replace(" ", "\n "), f"https://mirror.example/{i}")
        add(f"near-{i:03d}", mutate(base[i + 1], 0.02, rng, vocab), f"https://near.example/{i}")
        add(
            f"url-{i:03d}",
            base[i + 2][: len(base[i + 2]) // 2],
            f"https://www.site{(i + 2) % 40}.example/page/{i + 2}?utm_source=x",
            "2024-06-01T00:00:00Z",
        )
    add("empty-1", "", "https://empty.example/1")
    n = len(ids)
    table = pa.table({"id": ids, "url": urls, "date": dates, "source": ["t"] * n, "text": texts}, schema=DOC_SCHEMA)
    scores = [None if i % 17 == 0 else round(rng.random(), 6) for i in range(n)]
    return table.append_column("score", pa.array(scores, pa.float64())).append_column(
        "lang", pa.array([["en", "fr", "de"][i % 3] for i in range(n)])
    )


STAGES = {
    "exact_dedup": lambda: ExactDedup(),
    "minhash_dedup": lambda: MinHashDedup(sample_weights={"2": 2, "3+": 1}),
    "minhash_signature": lambda: MinHashDedup(verify="signature", threshold=0.7, num_perm=128, bands=16, rows=8),
    "url_dedup": lambda: UrlDedup(),
    "paragraph_dedup": lambda: ParagraphDedup(max_documents=2, min_remaining_chars=200),
    "paragraph_spans": lambda: ParagraphDedup(unit="sentence", span=3, keep="none"),
    "top_fraction": lambda: TopFraction(score="score", keep=0.3, by_language=True),
}


def _rows(table: pa.Table, columns: list[str]) -> dict[str, tuple]:
    return {row["id"]: tuple(row.get(c) for c in columns) for row in table.to_pylist()}


@pytest.mark.parametrize("name", sorted(STAGES))
def test_in_memory_and_spark_runs_keep_the_same_documents(spark, corpus, name):
    from pipelines.global_runners import run_global

    local_stage = STAGES[name]()
    local = local_stage.run_local(corpus)
    added = [f.name for f in local_stage.applier({"cutoffs": {}}).output_fields(corpus.schema)]
    columns = ["text", DROP_REASON, *added]
    expected = {**_rows(local.kept, columns), **_rows(local.dropped, columns)}
    assert len(expected) == corpus.num_rows and 0 < local.dropped.num_rows < corpus.num_rows  # the stage did something
    counters, notes = local_stage.take_counters(), local_stage.take_notes()  # what the decision recorded
    df = spark.createDataFrame(corpus.to_pandas())
    for partitions in (1, 3):
        spark_stage = STAGES[name]()
        out = pa.Table.from_pandas(run_global(df.repartition(partitions), spark_stage).toPandas(), preserve_index=False)
        assert _rows(out, columns) == expected, f"{name} at {partitions} partitions"
        assert (spark_stage.take_counters(), spark_stage.take_notes()) == (counters, notes)


def test_spark_begins_each_task_once_with_the_decision_rows_of_all_its_documents(spark, corpus, monkeypatch):
    """An applier with state per task sees one task as the in-memory runner does: begun once with every
    decision row of its documents, then all its batches, then finished once."""
    from pipelines.global_runners import run_global

    class Counting(Applier):
        def __init__(self, inner: Applier):
            super().__init__(inner.stage_name)
            self.inner, self.begins, self.batches, self.rows = inner, 0, 0, 0

        def output_fields(self, input_schema):
            return self.inner.output_fields(input_schema)

        def begin(self, key, decisions):
            self.begins, self.rows = self.begins + 1, 0 if decisions is None else decisions.num_rows
            self.inner.begin(key, decisions)

        def process(self, batch):
            self.batches += 1
            return self.inner.process(batch)

        def finish(self):
            return {"begins": self.begins, "batches": self.batches, "rows": self.rows}

    tasks: list[dict] = []
    applier = ExactDedup.applier
    monkeypatch.setattr(ExactDedup, "applier", lambda self, state: Counting(applier(self, state)))
    monkeypatch.setattr(ExactDedup, "complete", lambda self, state, finished: tasks.extend(finished))
    rows = ExactDedup().decide(ExactDedup().prepare(corpus), corpus)[0].num_rows
    batch_rows = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "20")
    try:
        run_global(spark.createDataFrame(corpus.to_pandas()).repartition(3), ExactDedup()).count()
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", batch_rows)
    assert [t["begins"] for t in tasks] == [1, 1, 1] and sum(t["batches"] for t in tasks) > 3
    assert sum(t["rows"] for t in tasks) == rows > 0


# A pipeline reads only a document's own fields from JSONL: top_fraction's score comes from a stage before it
PIPELINE_STAGES = sorted(name for name in STAGES if name != "top_fraction")


@pytest.mark.parametrize("name", PIPELINE_STAGES)
def test_a_pipeline_run_keeps_the_documents_the_in_memory_run_keeps(spark, corpus, tmp_path, name):
    """The same stage as a step of ``dataprep run`` over the corpus written as JSONL: its prepare, Spark
    decision and applier tasks keep the documents, with the same columns, that ``run_local`` keeps."""
    from pipelines.pipeline_run import run_pipeline

    documents = corpus.filter(pa.compute.not_equal(corpus.column("text"), ""))  # the reader drops an empty document
    (tmp_path / "in.jsonl").write_text(
        "".join(json.dumps(row) + "\n" for row in documents.select(DOC_SCHEMA.names).to_pylist())
    )
    local_stage = STAGES[name]()
    local = local_stage.run_local(documents)
    counters = local_stage.take_counters()
    columns = ["text", *[f.name for f in local_stage.applier({"cutoffs": {}}).output_fields(corpus.schema)]]
    stage = STAGES[name]()
    config = load_config(
        {
            "input": {"paths": [str(tmp_path / "in.jsonl")], "batch_size": 50},
            "output": {"dir": str(tmp_path / "out")},
            "stages": [{"stage": stage.name, **stage.model_dump(mode="json", exclude_defaults=True)}],
        }
    )
    result = run_pipeline(config, spark=spark)
    assert _rows(pq.read_table(result.corpus_dir), columns) == _rows(local.kept, columns)
    stats = {s["stage"]: s for s in json.loads((tmp_path / "out" / "stats.json").read_text())["stages"]}[stage.name]
    assert stats["dropped"] == dict(Counter(local.dropped.column(DROP_REASON).to_pylist())) != {}
    assert stats.get("counters", {}) == dict(counters)


def test_tokenize_trains_on_the_same_sample_and_writes_the_same_tokens(spark, corpus, tmp_path):
    """The tokenizer's training sample is the shared hash rule's (``dataprep.core.sampling``) in both
    runners, so both train the same tokenizer and write the same documents' tokens."""
    from pipelines.global_runners import run_global

    def stage(folder: str) -> Tokenize:
        return Tokenize(
            tokenizer=str(tmp_path / folder / "tok"),
            output_dir=str(tmp_path / folder / "shards"),
            tokens_per_shard=50_000,
            train={"vocab_size": 800, "sample_documents": 120, "character_coverage": 0.995, "seed": 3},
        )

    local = stage("local").run_local(corpus)
    assert local.dropped.column(DROP_REASON).to_pylist() == ["empty"]
    spark_out = run_global(spark.createDataFrame(corpus.to_pandas()).repartition(3), stage("spark")).toPandas()
    metas = [Tokenizer.load(str(tmp_path / f / "tok")).meta["training"] for f in ("local", "spark")]
    assert metas[0]["sample_documents"] == 120 and metas[0]["corpus_documents"] == corpus.num_rows - 1
    assert metas[0]["sample_sha256"] == metas[1]["sample_sha256"]
    assert (
        open(tmp_path / "local" / "tok" / "tokenizer.model", "rb").read()
        == open(tmp_path / "spark" / "tok" / "tokenizer.model", "rb").read()
    )
    manifests = [load_manifest(str(tmp_path / f / "shards")) for f in ("local", "spark")]
    assert manifests[0]["tokens"] == manifests[1]["tokens"] == int(spark_out["num_tokens"].sum())
    assert len(manifests[1]["shards"]) >= 3  # one shard series per Spark task
    docs = [
        sorted(tuple(doc.tolist()) for shard in open_dataset(str(tmp_path / f / "shards")) for doc in shard)
        for f in ("local", "spark")
    ]
    assert docs[0] == docs[1] and len(docs[0]) == corpus.num_rows - 1
    assert dict(zip(local.kept.column("id").to_pylist(), local.kept.column("num_tokens").to_pylist())) == {
        i: n for i, n, r in zip(spark_out["id"], spark_out["num_tokens"], spark_out[DROP_REASON]) if r is None
    }
