"""Hugging Face datasets as a way in: a dataset saved with ``save_to_disk`` (one split or several) read as its
Arrow files, through ``dataprep run`` on Spark, with the real package. The way out (token shards as an
``IterableDataset``) is tested in tests/dataprep/tokenize/test_shards.py."""

from __future__ import annotations

import gzip
import json

import pyarrow.parquet as pq
import pytest

from dataprep.core.config import InputConfig, load_config
from dataprep.core.inputs import expand_inputs
from dataprep.core.stage import concat
from dataprep.readers import detect_format, iter_documents
from pipelines.pipeline_run import run_pipeline

datasets = pytest.importorskip("datasets")


@pytest.fixture(scope="module")
def documents(shared_data) -> list[dict]:
    with gzip.open(shared_data / "documents" / "dolma-cc_en_head-0174.jsonl.gz", "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def _saved(documents, folder, **splits) -> str:
    """``documents`` as a dataset (columns ``doc_id`` and ``content``, as a user's might be named) saved to
    ``folder``; with ``splits``, a DatasetDict of those index ranges."""
    rows = {"doc_id": [d["id"] for d in documents], "content": [d["text"] for d in documents]}
    whole = datasets.Dataset.from_dict(rows)
    saved = (
        datasets.DatasetDict({name: whole.select(range(*bounds)) for name, bounds in splits.items()})
        if splits
        else whole
    )
    saved.save_to_disk(str(folder))
    return str(folder)


def test_a_saved_dataset_reads_as_its_arrow_files_only(documents, tmp_path):
    folder = _saved(documents, tmp_path / "ds")
    files = expand_inputs([folder])
    assert files and all(f.endswith(".arrow") for f in files)  # state.json and dataset_info.json are bookkeeping
    assert {detect_format(f) for f in files} == {"arrow"}
    results = [
        r for f in files for r in iter_documents(f, InputConfig(text_field="content", id_field="doc_id", batch_size=3))
    ]
    kept = concat(r.kept for r in results)
    assert kept.column("id").to_pylist() == [d["id"] for d in documents]
    assert kept.column("text").to_pylist() == [d["text"] for d in documents]


def test_a_saved_dataset_without_the_text_field_names_its_columns(documents, tmp_path):
    files = expand_inputs([_saved(documents, tmp_path / "ds")])
    with pytest.raises(ValueError, match="no column 'text'.*content"):
        list(iter_documents(files[0], InputConfig()))


def test_a_damaged_arrow_file_is_a_counted_drop(documents, tmp_path):
    folder = _saved(documents, tmp_path / "ds")
    arrow = expand_inputs([folder])[0]
    with open(arrow, "r+b") as fh:
        fh.truncate(200)
    results = list(iter_documents(arrow, InputConfig(text_field="content", id_field="doc_id")))
    dropped = concat(r.dropped for r in results)
    assert dropped.column("drop_reason").to_pylist() == ["error:corrupt_arrow"]


def test_dataprep_run_cleans_a_dataset_dict_on_spark(documents, spark, tmp_path):
    half = len(documents) // 2
    folder = _saved(documents, tmp_path / "dsdict", train=(0, half), test=(half, len(documents)))
    config = load_config(
        {
            "input": {"paths": [folder], "text_field": "content", "id_field": "doc_id"},
            "output": {"dir": str(tmp_path / "out")},
            "stages": [{"stage": "exact_dedup"}],
        }
    )
    result = run_pipeline(config, spark=spark)
    corpus = pq.read_table(result.corpus_dir)
    assert sorted(corpus.column("id").to_pylist()) == sorted({d["id"] for d in documents})
    assert set(corpus.column("source_kind").to_pylist()) == {"web"}
