"""top_fraction: the Spark run keeps what the exact in-memory selection keeps (exact on small groups,
within the stated relative error on large ones), whatever the partitioning; the cut-offs reach
stats.json, and given back as ``cutoffs`` they keep the same documents."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataprep.core.config import load_config
from dataprep.core.runner import run_stages
from dataprep.quality.top_fraction import ALL, NO_SCORE, REASON, TopFraction
from dedup_corpus import real_documents
from pipelines.global_runners import run_global
from pipelines.pipeline_run import run_pipeline


def _scored(n: int, seed: int = 0) -> pa.Table:
    """Documents with scores (ties included, a few missing) in three languages of unequal size."""
    rng = random.Random(seed)
    scores = [None if i % 50 == 7 else round(rng.random(), 2 if i % 3 else 6) for i in range(n)]
    langs = [rng.choice(["en", "en", "en", "de", "fr"]) for _ in range(n)]
    return pa.table({"id": [f"d{i:05d}" for i in range(n)], "text": ["x"] * n, "lang": langs, "score": scores})


def _spark_kept(spark, table: pa.Table, stage: TopFraction, partitions: int) -> tuple[set[str], dict]:
    df = spark.createDataFrame(table.to_pandas()).repartition(partitions)
    out = run_global(df, stage)
    rows = out.select("id", "drop_reason").collect()
    return {r.id for r in rows if r.drop_reason is None}, {r.id: r.drop_reason for r in rows}


@pytest.mark.parametrize("by_language", [False, True])
def test_spark_selection_is_the_exact_one_at_any_partitioning(spark, by_language):
    table = _scored(900)
    local_stage = TopFraction(score="score", keep=0.2, by_language=by_language)
    local = local_stage.run_local(table)
    expected = set(local.kept.column("id").to_pylist())
    local_cutoffs = local_stage.take_notes()["cutoffs"]
    for partitions in (1, 4):
        stage = TopFraction(score="score", keep=0.2, by_language=by_language)
        kept, reasons = _spark_kept(spark, table, stage, partitions)
        assert kept == expected
        notes = stage.take_notes()
        assert notes["cutoffs"] == local_cutoffs and notes["relative_error"] == {g: 0.0 for g in local_cutoffs}
    scored = [s is not None for s in table.column("score").to_pylist()]
    assert sum(r == NO_SCORE for r in reasons.values()) == len(scored) - sum(scored)
    assert 0.17 * sum(scored) <= len(expected) <= 0.2 * sum(scored)  # ties at the cut-off leave together
    langs = dict(zip(table.column("id").to_pylist(), table.column("lang").to_pylist()))
    if by_language:  # every language keeps its own share, not the corpus's
        for lang in ("en", "de", "fr"):
            n = sum(1 for i, s in zip(table.column("id").to_pylist(), scored) if s and langs[i] == lang)
            assert 0.15 * n <= sum(langs[i] == lang for i in expected) <= 0.2 * n


def test_large_groups_stay_within_the_stated_relative_error(spark):
    table = _scored(6000, seed=3)
    exact = TopFraction(score="score", keep=0.1).run_local(table)
    stage = TopFraction(score="score", keep=0.1, exact_below=1000, relative_error=0.01)
    for partitions in (1, 4):
        kept, _ = _spark_kept(spark, table, stage, partitions)
        assert stage.take_notes()["relative_error"] == {ALL: 0.01}
        n = sum(s is not None for s in table.column("score").to_pylist())
        assert abs(len(kept) - exact.kept.num_rows) <= 0.01 * n + 1


@pytest.fixture(scope="module")
def top_half_run(spark, shared_data, tmp_path_factory):
    """40 real pages through langid, the quality classifier and the top half by its score, on Spark: the
    folder, the texts, the stages, the ids kept and top_fraction's stats."""
    root = tmp_path_factory.mktemp("top-fraction")
    texts = real_documents(shared_data)[:40]
    (root / "in.jsonl").write_text(
        "".join(json.dumps({"id": f"p{i:03d}", "text": t}) + "\n" for i, t in enumerate(texts))
    )
    stages = [
        {"stage": "langid"},
        {"stage": "quality_classifier"},
        {"stage": "top_fraction", "score": "quality_score", "keep": 0.5},
    ]
    config = load_config(
        {"input": {"paths": [str(root / "in.jsonl")]}, "output": {"dir": str(root / "a")}, "stages": stages}
    )
    corpus = set(pq.read_table(run_pipeline(config, spark=spark).corpus_dir).column("id").to_pylist())
    stats = {s["stage"]: s for s in json.loads((root / "a" / "stats.json").read_text())["stages"]}["top_fraction"]
    return {"root": root, "texts": texts, "stages": stages, "corpus": corpus, "stats": stats}


def test_top_fraction_cutoffs_reach_the_stats(top_half_run):
    stats, corpus = top_half_run["stats"], top_half_run["corpus"]
    assert stats["notes"]["relative_error"] == {ALL: 0.0} and stats["docs_kept"] == len(corpus) == 20
    assert stats["dropped"] == {REASON: 20}
    assert ALL in stats["notes"]["cutoffs"]


def test_the_in_memory_run_keeps_the_spark_runs_documents_above_its_cutoff(top_half_run):
    texts, cutoff = top_half_run["texts"], top_half_run["stats"]["notes"]["cutoffs"][ALL]
    local, _ = run_stages(
        load_config({"stages": top_half_run["stages"]}).stages,
        pa.table(
            {
                "id": [f"p{i:03d}" for i in range(40)],
                "url": [None] * 40,
                "date": [None] * 40,
                "source": ["t"] * 40,
                "text": texts,
            }
        ),
    )
    assert set(local.kept.column("id").to_pylist()) == top_half_run["corpus"]
    assert min(local.kept.column("quality_score").to_pylist()) > cutoff


def test_a_rerun_given_the_cutoffs_keeps_the_same_documents(spark, top_half_run):
    root, stages, cutoff = top_half_run["root"], top_half_run["stages"], top_half_run["stats"]["notes"]["cutoffs"][ALL]
    pinned = stages[:2] + [{**stages[2], "cutoffs": {ALL: cutoff}}]
    config = load_config(
        {"input": {"paths": [str(root / "in.jsonl")]}, "output": {"dir": str(root / "b")}, "stages": pinned}
    )
    assert (
        set(pq.read_table(run_pipeline(config, spark=spark).corpus_dir).column("id").to_pylist())
        == (top_half_run["corpus"])
    )


def test_top_fraction_refuses_cutoffs_of_another_grouping_or_a_score_that_is_no_number(spark):
    with pytest.raises(ValueError, match="cutoffs must be"):
        TopFraction(score="s", keep=0.1, cutoffs={"en": 0.5})
    with pytest.raises(ValueError, match="no 'nope' column"):
        TopFraction(score="nope", keep=0.1).run_local(_scored(10))
    with pytest.raises(ValueError, match="not a number"):
        TopFraction(score="lang", keep=0.1).run_local(_scored(10))
    with pytest.raises(ValueError, match="not a number"):
        run_global(spark.createDataFrame(_scored(10).to_pandas()), TopFraction(score="lang", keep=0.1))


def test_dclm_preset_runs_rules_then_the_classifier_top_tenth(shared_data):
    config = load_config("dclm", sets=["stages.8.score_column=dclm_score", "stages.9.score=dclm_score"])
    names = [s.name for s in config.stages]
    assert names[:2] == ["extract", "langid"] and names[-2:] == ["quality_classifier", "top_fraction"]
    assert names.index("minhash_dedup") < names.index("quality_classifier") and "fineweb_quality" in names
    select = config.stages[-2:]
    assert select[1].keep == 0.1 and not select[1].by_language
    texts = real_documents(shared_data)[:30]
    table = pa.table(
        {
            "id": [f"p{i:02d}" for i in range(30)],
            "url": [None] * 30,
            "date": [None] * 30,
            "source": ["t"] * 30,
            "text": texts,
        }
    )
    result, stats = run_stages(select, table)
    assert result.kept.num_rows == 3
    assert {s.stage: s for s in stats}["top_fraction"].notes["cutoffs"][ALL] < min(
        result.kept.column("dclm_score").to_pylist()
    )
