"""A rerun notices input that changed since the last run and reads it again, saying what changed; an
output folder inside an input folder is refused before any work."""

from __future__ import annotations

import json
import os

import pyarrow.parquet as pq
import pytest

from dataprep.core.config import load_config
from pipelines.pipeline_run import run_pipeline


def _docs(n: int, start: int = 0) -> str:
    return "".join(
        json.dumps({"id": f"d{i}", "text": f"document number {i} says something of its own."}) + "\n"
        for i in range(start, start + n)
    )


def _config(inputs, out):
    return load_config({"input": {"paths": [str(p) for p in inputs]}, "output": {"dir": str(out)}, "stages": []})


def test_an_appended_input_is_read_again_on_rerun(spark, tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.jsonl").write_text(_docs(20))
    (data / "b.jsonl").write_text(_docs(5, start=100))
    (data / os.fsdecode(b"caf\xe9.jsonl")).write_text(_docs(2, start=200))  # a Latin-1 file name
    config = _config([data], tmp_path / "out")
    first = run_pipeline(config, spark=spark)
    corpus = pq.read_table(first.corpus_dir)
    assert corpus.num_rows == 27 and f"{data}/caf\ufffd.jsonl" in corpus.column("source").to_pylist()
    with open(data / "a.jsonl", "a") as fh:
        fh.write(_docs(14, start=20))
    capsys.readouterr()
    second = run_pipeline(config, spark=spark)
    printed = capsys.readouterr().out
    assert pq.read_table(second.corpus_dir).num_rows == 41 and second.skipped_steps == 0
    assert (
        "1 input changed since the last run" in printed
        and "a.jsonl" in printed
        and "b.jsonl" not in printed.split("changed")[1].split("\n")[0]
    )
    assert "already done" not in printed
    third = run_pipeline(config, spark=spark)  # unchanged since: nothing redone
    assert third.skipped_steps == len(third.steps)


def test_an_output_folder_inside_an_input_folder_is_refused(spark, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.jsonl").write_text(_docs(3))
    for out in (data / "out", data):
        with pytest.raises(ValueError, match="inside the input folder"):
            run_pipeline(_config([data], out), spark=spark)
    assert sorted(p.name for p in data.iterdir()) == ["a.jsonl"]
    with pytest.raises(ValueError, match="inside the input folder"):
        run_pipeline(_config([tmp_path / "d*"], data / "out"), spark=spark)
