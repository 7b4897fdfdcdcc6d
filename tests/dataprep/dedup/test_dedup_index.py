"""Incremental dedup: run 1 saves its index; run 2, loading it, removes its near and exact copies of
run 1's documents and nothing else, the same for any partitioning; a third run loads both indexes.
Indexes from another configuration, or with a damaged file, are refused."""

from __future__ import annotations

import json
import shutil

import pytest

from dataprep.dedup.exact import ExactDedup
from dataprep.dedup.index import DedupIndexError, open_index
from dataprep.dedup.minhash import MinHashDedup
from dedup_corpus import doc_table, real_documents


def _near(text: str, seed: int) -> str:
    """The text with one word in 100 replaced."""
    words = text.split()
    for k in range(seed % 7, len(words), 100):
        words[k] = f"zz{seed}x{k}"
    return " ".join(words)


@pytest.fixture(scope="module")
def runs(shared_data):
    """Three snapshots' documents. Run 1: 25 real documents. Run 2: 24 others, near copies of three
    run-1 documents, an exact copy of one under a new id, one run-1 document again under its own id,
    and a near copy of one of its own. Run 3: near copies of a run-1 and a run-2 document, and a new one."""
    texts = [t for t in real_documents(shared_data) if len(t.split()) >= 150]
    first, second = texts[:20], texts[20:-1]
    run1 = {f"a-{i:02d}": t for i, t in enumerate(first)}
    run2 = {f"b-{i:02d}": t for i, t in enumerate(second)}
    planted = {"b-near-0": "a-01", "b-near-1": "a-05", "b-near-2": "a-09", "b-exact": "a-12", "a-03": "a-03"}
    for i, (doc, source) in enumerate(planted.items()):
        run2[doc] = run1[source] if doc.startswith(("b-exact", "a-")) else _near(run1[source], i)
    run2["b-own-copy"] = _near(run2["b-04"], 9)
    run3 = {"c-1": _near(run1["a-07"], 3), "c-2": _near(run2["b-06"], 4), "c-3": texts[-1]}
    return run1, run2, run3, {**planted, "b-own-copy": "b-04"}


def _removed(df) -> dict[str, str]:
    rows = df.select("id", "dup_cluster", "drop_reason").collect()
    return {r.id: r.dup_cluster for r in rows if r.drop_reason}


def test_run_two_removes_only_its_copies_of_run_one(spark, runs, tmp_path):
    from pipelines.global_runners import run_global

    run1, run2, run3, planted = runs
    first, second = str(tmp_path / "index-1"), str(tmp_path / "index-2")
    assert (
        _removed(run_global(spark.createDataFrame(doc_table(run1).to_pandas()), MinHashDedup(save_index=first))) == {}
    )
    manifest = json.loads((tmp_path / "index-1" / "index.json").read_text())
    assert manifest["rows"] == len(run1) and manifest["config"]["bands"] == 14 and manifest["files"]
    df2 = spark.createDataFrame(doc_table(run2).to_pandas())
    alone = _removed(run_global(df2, MinHashDedup()))
    assert alone == {"b-own-copy": "b-04"}  # per-snapshot dedup, the default: run 1 is not consulted
    found = [
        _removed(
            run_global(df2.repartition(n), MinHashDedup(load_indexes=[first], save_index=second if n == 4 else None))
        )
        for n in (1, 4)
    ]
    assert found[0] == found[1] == planted
    json_before = (tmp_path / "index-1" / "index.json").read_text()
    df3 = spark.createDataFrame(doc_table(run3).to_pandas())
    assert _removed(run_global(df3, MinHashDedup(load_indexes=[first, second]))) == {"c-1": "a-07", "c-2": "b-06"}
    assert (tmp_path / "index-1" / "index.json").read_text() == json_before and open_index(
        first, MinHashDedup().index_config()
    )


def test_exact_index(spark, runs, tmp_path):
    from pipelines.global_runners import run_global

    run1, run2, _, _ = runs
    index = str(tmp_path / "exact")
    run_global(spark.createDataFrame(doc_table(run1).to_pandas()), ExactDedup(save_index=index)).collect()
    rows = run_global(
        spark.createDataFrame(doc_table(run2).to_pandas()).repartition(3), ExactDedup(load_indexes=[index])
    ).collect()
    assert {r.id: r.exact_cluster for r in rows if r.drop_reason} == {
        "b-exact": "a-12",
        "a-03": "a-03",
    }  # near copies stay


def test_an_index_is_never_saved_over_a_persons_files(spark, runs, tmp_path):
    from pipelines.global_runners import run_global
    from pipelines.run_folder import OutputInUse

    run1, _, _, _ = runs
    notes = tmp_path / "index" / "data" / "README.txt"
    notes.parent.mkdir(parents=True)
    notes.write_text("my notes")
    with pytest.raises(OutputInUse, match="README.txt"):  # Spark would replace data/ whole
        run_global(
            spark.createDataFrame(doc_table(run1).to_pandas()), ExactDedup(save_index=str(tmp_path / "index"))
        ).collect()
    assert notes.read_text() == "my notes"


def test_an_index_from_another_configuration_or_damaged_is_refused(spark, runs, tmp_path):
    from pipelines.global_runners import run_global

    run1, _, _, _ = runs
    index = str(tmp_path / "index")
    run_global(spark.createDataFrame(doc_table(run1).to_pandas()), MinHashDedup(save_index=index)).collect()
    with pytest.raises(DedupIndexError, match="bands: index 14, stage 20.*rows: index 8, stage 5"):
        open_index(index, MinHashDedup(bands=20, rows=5).index_config())
    with pytest.raises(
        DedupIndexError, match="another configuration.*stage: index 'minhash_dedup', stage 'exact_dedup'"
    ):
        open_index(index, ExactDedup().index_config())
    damaged = tmp_path / "damaged"
    shutil.copytree(index, damaged)
    part = next((damaged / "data").glob("*.parquet"))
    part.write_bytes(part.read_bytes()[:-1] + b"\0")
    with pytest.raises(DedupIndexError, match="checksum"):
        open_index(str(damaged), MinHashDedup().index_config())
    (damaged / "index.json").unlink()
    with pytest.raises(DedupIndexError, match="no index.json"):
        open_index(str(damaged), MinHashDedup().index_config())
    with pytest.raises(ValueError, match="Spark runs"):
        MinHashDedup(load_indexes=[index]).run_local(doc_table(run1))
    with pytest.raises(ValueError, match="cannot be rewritten"):
        ExactDedup(save_index=index, load_indexes=[index])
