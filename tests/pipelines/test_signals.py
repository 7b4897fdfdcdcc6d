"""Signals mode and filter on Spark: for the fineweb, dclm and code presets, a full run and a signals run
followed by ``filter`` keep the same documents with the same texts, drop the same documents for the same
reasons at each stage, and write the same token shards byte for byte; a filter with other thresholds gives
what a full run with them gives; no document the reader yields is missing from the signals."""

from __future__ import annotations

import hashlib
import json
import sysconfig
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dataprep.core.config import ConfigError, load_config
from dataprep.demo.corpus import write_demo_warc
from pipelines.cli import main as dataprep_cli
from pipelines.filter_run import run_filter
from pipelines.pipeline_run import run_pipeline
from pipelines.signals_run import run_signals

pytestmark = pytest.mark.slow  # many processes or subprocess CLIs: scripts/test.sh --fast leaves it out

STDLIB = Path(sysconfig.get_paths()["stdlib"])
WARCS = [
    "warc/cc-main-2024-22-whirlwind/whirlwind.warc.gz",
    "warc/wget/IAH-urls-wget.warc.gz",
    "warc/malformed/example-trunc.warc",
]
SMALL_TOKENIZER = ["stages.-1.train.vocab_size=500"]


def _inputs(preset: str, shared_data: Path, root: Path) -> list[str]:
    if preset == "code":
        return [str(STDLIB / name) for name in ("json", "email", "logging")]
    demo = root / "demo.warc.gz"  # planted duplicates, spam and PII beside real pages
    write_demo_warc(str(demo))
    return [str(demo)] + [str(shared_data / w) for w in WARCS]


def _config(preset: str, inputs: list[str], out: Path, sets: list[str] = ()):
    tokenizes = preset != "dclm"
    return load_config(
        preset,
        {"input": {"paths": inputs}, "output": {"dir": str(out)}},
        sets=(SMALL_TOKENIZER if tokenizes else []) + list(sets),
    )


def corpus(folder) -> list[tuple]:
    return sorted((r["id"], r["text"]) for r in pq.read_table(str(folder)).to_pylist())


def drops(result) -> dict:
    return {s.stage: (s.docs_in, s.docs_kept, dict(s.dropped)) for s in result.stats}


def shards(out: Path) -> dict:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted((out / "shards").glob("*"))
        if p.suffix in (".bin", ".idx")
    }


@pytest.fixture(scope="module", params=["fineweb", "dclm", "code"])
def runs(request, spark, shared_data, tmp_path_factory):
    preset = request.param
    root = tmp_path_factory.mktemp(preset)
    inputs = _inputs(preset, shared_data, root)
    full = run_pipeline(_config(preset, inputs, root / "full"), spark=spark)
    signals = run_signals(_config(preset, inputs, root / "signals"), spark=spark)
    filtered = run_filter(str(root / "signals"), _config(preset, inputs, root / "filtered"), spark=spark)
    return preset, root, inputs, full, signals, filtered


def test_filter_over_signals_gives_the_full_runs_documents_reasons_and_shards(runs):
    preset, root, _, full, _, filtered = runs
    assert corpus(filtered.corpus_dir) == corpus(full.corpus_dir)
    assert len(corpus(full.corpus_dir)) >= (2 if preset == "dclm" else 10)  # dclm keeps its top 10%
    assert drops(filtered) == drops(full)
    assert sum(sum(s.dropped.values()) for s in full.stats) > 0
    if preset != "dclm":
        assert shards(root / "filtered") == shards(root / "full") != {}
    full_columns = pq.read_schema(next((root / "full" / "corpus").glob("*.parquet"))).names
    assert pq.read_schema(next((root / "filtered" / "corpus").glob("*.parquet"))).names == full_columns


def test_signals_keep_every_document_the_reader_yields_with_each_stages_verdict(runs):
    preset, root, _, full, signals, _ = runs
    table = pq.read_table(str(root / "signals" / "signals" / "data"))
    rows = table.filter(table.column("drop_reason").is_null())
    read = next(s for s in full.stats if s.stage == "read")
    assert rows.num_rows == read.docs_kept  # nothing a stage would drop is missing
    config = load_config(preset, check_assets=False)
    for position, stage in enumerate(config.stages):
        if stage.name != "tokenize":
            assert f"{position:02d}_{stage.name}__reason" in table.column_names
    reasons = {r for c in table.column_names if c.endswith("__reason") for r in table.column(c).to_pylist() if r}
    dropped = {r for s in full.stats for r in s.dropped if s.stage != "read"}
    assert dropped <= reasons  # every reason a full run gave is a signal (many documents have several)
    if preset == "fineweb":
        empty = table.filter(table.column("00_extract__reason").is_valid())
        assert empty.num_rows and set(empty.column("00_extract__reason").to_pylist()) == {"extract:empty"}
        assert max(s for s in table.column("11_minhash_dedup__dup_cluster_size").to_pylist() if s) > 1
    if preset == "dclm":
        ranks = sorted(r for r in table.column("09_top_fraction__rank").to_pylist() if r is not None)
        assert ranks == list(range(1, len(ranks) + 1))


def test_a_second_filter_with_other_thresholds_is_a_full_run_with_them(runs, spark):
    preset, root, inputs, _, _, _ = runs
    other = {
        "fineweb": [
            "stages.1.threshold=0.97",
            "stages.11.threshold=0.6",
            "stages.11.sample_weights=fineweb2",
            "stages.12.repeat_by=sample_weight",
        ],  # rehydrated by FineWeb-2's table from the stored clusters
        "dclm": ["stages.9.keep=0.3"],
        "code": ["stages.5.threshold=0.5"],
    }[preset]
    full = run_pipeline(_config(preset, inputs, root / "full-other", other), spark=spark)
    sets = [flag for value in (SMALL_TOKENIZER if preset != "dclm" else []) + other for flag in ("--set", value)]
    args = [
        "filter",
        str(root / "signals"),
        "--config",
        preset,
        "--output",
        str(root / "filtered-other"),
        "--json",
        *sets,
    ]
    assert dataprep_cli(args) == 0
    stats = json.loads((root / "filtered-other" / "stats.json").read_text())
    assert corpus(root / "filtered-other" / "corpus") == corpus(full.corpus_dir)
    if (
        preset != "code"
    ):  # the new thresholds change what is kept (code's lower MinHash threshold finds no more pairs here)
        assert corpus(full.corpus_dir) != corpus(root / "full" / "corpus")
    assert {s["stage"]: s["dropped"] for s in stats["stages"]} == {s.stage: dict(s.dropped) for s in full.stats}
    if preset != "dclm":
        assert shards(root / "filtered-other") == shards(root / "full-other")
    if preset == "fineweb":
        assert dataprep_cli(["report", str(root / "filtered-other")]) == 0
        report = (root / "filtered-other" / "report" / "report.md").read_text()
        assert "## Rehydration" in report and "tokens their copies add" in report


def test_where_expressions_drop_before_the_first_whole_corpus_stage(runs, spark):
    preset, root, _, _, _, _ = runs
    if preset != "fineweb":
        pytest.skip("one preset is enough")
    out = run_filter(
        str(root / "signals"), _config(preset, [], root / "where"), where=["lang_score > 0.95"], spark=spark
    )
    stages = [s.stage for s in out.stats]
    assert stages.index("where") == stages.index("exact_dedup") - 1
    kept = pq.read_table(out.corpus_dir).column("lang_score").to_pylist()
    assert kept and min(kept) > 0.95
    with pytest.raises(ConfigError, match="no_such_column"):
        run_filter(
            str(root / "signals"), _config(preset, [], root / "where-bad"), where=["no_such_column > 1"], spark=spark
        )


def test_filter_refuses_settings_its_signals_cannot_decide(runs, spark):
    preset, root, _, _, _, _ = runs
    if preset != "fineweb":
        pytest.skip("one preset is enough")
    with pytest.raises(ConfigError, match=r"stages.2 \(gopher_repetition\).*cannot be re-decided"):
        run_filter(str(root / "signals"), _config(preset, [], root / "x", ["stages.2.dup_line_frac=0.1"]), spark=spark)
    with pytest.raises(ConfigError, match=r"stages.11 \(minhash_dedup\): num_perm"):
        run_filter(
            str(root / "signals"),
            _config(preset, [], root / "y", ["stages.11.num_perm=64", "stages.11.bands=8"]),
            spark=spark,
        )


def test_signals_mode_refuses_paragraph_dedup_by_name(tmp_path):
    config = load_config(
        {
            "input": {"paths": ["x"]},
            "output": {"dir": str(tmp_path)},
            "stages": [{"stage": "paragraph_dedup"}, {"stage": "exact_dedup"}],
        }
    )
    with pytest.raises(ConfigError, match=r"stages.0 \(paragraph_dedup\): paragraph_dedup has no signals form"):
        run_signals(config)
