"""A user's mistake on the ``dataprep`` command line (a wrong path, a file where a folder goes, a bad
number, a master Spark cannot parse) reads as one clear line with a non-zero exit, and no traceback;
with ``--json`` stdout still holds one JSON object."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # many processes or subprocess CLIs: scripts/test.sh --fast leaves it out

# (arguments, exit status, text the message must hold). FILE is a file that exists, MISSING a path that
# does not; every case fails before any work (Spark is not started).
CASES = [
    (["run", "no-such-config.yaml"], 2, "does not exist"),
    (["run", "ingest", "--input", "MISSING", "--output", "OUT"], 2, "matches no file"),
    (["run", "ingest", "--input", "no-such/warc.paths.gz", "--output", "OUT"], 2, "no such file"),
    (["run", "ingest", "--input", "http://127.0.0.1:9/crawl/*.warc.gz", "--output", "OUT"], 2, "cannot read input"),
    (["run", "ingest", "--input", "FILE", "--output", "FILE"], 2, "is a file"),
    (["run", "ingest", "--input", "FILE", "--output", "OUT", "--master", "nonsense://x"], 2, "is not a Spark master"),
    (["run", "ingest", "--input", "FILE", "--output", "OUT", "--set", "spark.master=foo"], 2, "is not a Spark master"),
    (["run", "ingest", "--input", "FILE", "--output", "OUT", "--set", "input.batch_size=-1"], 2, "input.batch_size"),
    (["run", "ingest", "--input", "FILE", "--output", "OUT", "--set", "stages.9.x=1"], 2, "stages.9"),
    (["demo-data", "--output", "FILE"], 2, "is a file, not a folder"),
    (
        ["train-ppl-model", "--input", "FILE", "--lang", "en", "--output", "OUT", "--vocab-size", "-5"],
        2,
        "--vocab-size: -5 must be positive",
    ),
    (["train-ppl-model", "--input", "FILE", "--lang", "en", "--output", "FILE"], 2, "is a file"),
    (["train-tokenizer", "--input", "FILE", "--output", "OUT", "--vocab-size", "5"], 2, "vocab_size"),
    (
        ["train-tokenizer", "--input", "FILE", "--output", "OUT", "--vocab-size", "600", "--master", "local[x]"],
        2,
        "is not a Spark master",
    ),
    (["train-classifier", "--input", "FILE", "--output", "OUT/c.bin", "--heldout", "1.5"], 2, "--heldout: 1.5"),
    (["train-classifier", "--input", "FILE", "--output", "OUT/c.bin", "--lr", "nan"], 2, "not a finite number"),
    (["train-classifier", "--input", "MISSING", "--output", "OUT/c.bin"], 2, "matches no file"),
    (["verify-shards", "MISSING"], 2, "manifest.json not found"),
    (["index-shards", "MISSING", "--vocab-size", "10", "--eos", "2"], 2, "MISSING"),
    (["export-nanogpt", "MISSING", "--output", "OUT", "--val-fraction", "2"], 2, "--val-fraction"),
    (["report", "MISSING"], 2, "stats.json not found"),
    (["estimate", "MISSING", "--pages", "1000"], 2, "stats.json not found"),
    (["arpa", "export", "MISSING", "--output", "FILE/out.arpa"], 2, "is a file, not a folder"),
    (["stages", "langd"], 2, "did you mean 'langid'"),
]


def _dataprep(args: list[str], cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"}
    return subprocess.run(
        [sys.executable, "-m", "pipelines.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    "args, status, expected", CASES, ids=[" ".join(c[0][:3]) + f" #{i}" for i, c in enumerate(CASES)]
)
def test_a_mistake_is_one_clear_line(args, status, expected, tmp_path):
    (tmp_path / "FILE").write_text('{"text": "a line of text"}\n')
    done = _dataprep(args, tmp_path)
    assert done.returncode == status, done.stderr
    assert "Traceback" not in done.stderr and 1 <= len(done.stderr.strip().splitlines()) <= 2, done.stderr
    assert expected in done.stderr, done.stderr
    assert not (tmp_path / "OUT").exists()  # nothing was written


@pytest.mark.parametrize(
    "args",
    [
        ["run", "ingest", "--input", "MISSING", "--json"],
        ["stages", "langd", "--json"],
        ["run", "ingest", "--master", "x", "--json"],
    ],
)
def test_json_prints_one_object_on_failure(args, tmp_path):
    done = _dataprep(args, tmp_path)
    assert done.returncode == 2
    result = json.loads(done.stdout)
    assert result["ok"] is False and result["exit_status"] == 2 and result["error"] in done.stderr
