"""``dataprep estimate``: a crawl's cost projected from a real sample run's stats.json, and the driver
pieces that must stay flat as the listing grows."""

from __future__ import annotations

import gzip
import json
import time

import pytest

from dataprep.core.config import load_config
from pipelines.cli import main as dataprep_main
from pipelines.pipeline_run import NothingKept, run_pipeline

STAGES = [{"stage": "extract"}, {"stage": "langid", "languages": ["en"]}, {"stage": "exact_dedup"}]


def _files(shared_data):
    return [
        shared_data / "warc" / "wget" / "dolma-sample-0000.warc.gz",
        shared_data / "warc" / "cc-main-2024-22-whirlwind" / "whirlwind.warc.gz",
    ]


def _run(spark, files, out):
    run_pipeline(
        load_config({"input": {"paths": [str(f) for f in files]}, "output": {"dir": str(out)}, "stages": STAGES}),
        spark=spark,
    )
    return out


@pytest.fixture(scope="module")
def sample_run(spark, shared_data, tmp_path_factory):
    """A real run on two crawled WARC files: the sample an estimate starts from."""
    return _run(spark, _files(shared_data), tmp_path_factory.mktemp("estimate") / "out")


def _estimate(capsys, *args) -> dict:
    assert dataprep_main(["estimate", *map(str, args), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_estimate_scales_with_pages(sample_run, capsys):
    saved = json.loads((sample_run / "stats.json").read_text())
    assert saved["cores"] == 2 and saved["input_files"] == 2
    small = _estimate(capsys, sample_run, "--pages", 100_000, "--cores", 10)
    large = _estimate(capsys, sample_run, "--pages", 1_000_000, "--cores", 10)
    stages = {s["stage"]: s for s in large["stages"]}
    assert list(stages) == ["read", "extract", "langid", "exact_dedup"]
    assert stages["exact_dedup"]["whole_corpus"] and not stages["extract"]["whole_corpus"]
    extract = next(s for s in saved["stages"] if s["stage"] == "extract")
    assert large["sample_cores"] == 2 and large["sample_pages"] == extract["docs_in"] > 0
    # a fixed cost per core plus a cost linear in pages, and the funnel narrows stage by stage
    huge = _estimate(capsys, sample_run, "--pages", 10_000_000, "--cores", 10)
    assert huge["core_hours"] - large["core_hours"] == pytest.approx(
        10 * (large["core_hours"] - small["core_hours"]), rel=1e-6
    )
    assert large["core_hours"] > small["core_hours"] > 0
    kept = [s["docs_kept"] for s in large["stages"]]
    assert kept == sorted(kept, reverse=True) and all(s["docs_kept"] <= s["docs_in"] for s in large["stages"])
    assert large["shuffle_bytes"] > 0 and large["output_bytes"] > 0
    assert large["assumptions"] and large["routed_fraction"] is not None and large["basis"] == "cpu"


def test_estimate_on_more_cores_takes_the_same_core_hours_in_less_wall_time(sample_run, capsys):
    large = _estimate(capsys, sample_run, "--pages", 1_000_000, "--cores", 10)
    wide = _estimate(capsys, sample_run, "--pages", 1_000_000, "--cores", 100)
    assert wide["core_hours"] >= large["core_hours"] and wide["wall_hours"] < large["wall_hours"]


def test_estimate_projects_fixed_costs_apart_from_the_per_page_cost(sample_run, capsys):
    saved = json.loads((sample_run / "stats.json").read_text())
    large = _estimate(capsys, sample_run, "--pages", 1_000_000, "--cores", 10)
    stages = {s["stage"]: s for s in large["stages"]}
    assert all(s["cpu_seconds"] > 0 for s in saved["stages"] if s["stage"] in ("read", "extract", "langid"))
    # what separates fixed costs: each task's first batch per document stage, and a global step's executor time
    langid = next(s for s in saved["stages"] if s["stage"] == "langid")
    assert (
        0 < langid["first_batch_docs"] <= langid["docs_in"]
        and 0 < langid["first_batch_cpu_seconds"] <= langid["cpu_seconds"]
    )
    dedup = next(s for s in saved["stages"] if s["stage"] == "exact_dedup")
    assert dedup["executor_seconds"] > 0 and dedup["executor_cpu_seconds"] > 0
    # and the part of it that is each Spark task's own cost, which does not grow with documents
    assert 0 < dedup["executor_fixed_cpu_seconds"] < dedup["executor_cpu_seconds"]
    projected = stages["exact_dedup"]["core_hours"] * 3600
    per_page = (dedup["executor_cpu_seconds"] - dedup["executor_fixed_cpu_seconds"] + dedup["cpu_seconds"]) / large[
        "sample_pages"
    ]
    assert projected == pytest.approx(dedup["executor_fixed_cpu_seconds"] + per_page * 1_000_000, rel=1e-6)


def test_estimate_reads_the_pages_from_a_listing_or_a_number(sample_run, capsys, tmp_path):
    large = _estimate(capsys, sample_run, "--pages", 1_000_000, "--cores", 10)
    listing = tmp_path / "warc.paths.gz"
    with gzip.open(listing, "wt") as fh:
        fh.write("".join(f"crawl-data/CC-MAIN-2024-22/segments/1/warc/f-{i}.warc.gz\n" for i in range(30)))
    by_listing = _estimate(capsys, sample_run, "--listing", listing)
    assert by_listing["pages"] == 15 * large["sample_pages"]  # 30 files x the sample's pages per file (2 files)
    assert _estimate(capsys, sample_run, "--pages", "2.5e9")["pages"] == 2_500_000_000


def test_estimate_prints_its_wall_time_with_its_assumptions_and_price(sample_run, capsys):
    large = _estimate(capsys, sample_run, "--pages", 1_000_000, "--cores", 10)
    assert dataprep_main(["estimate", str(sample_run), "--pages", "3000000000", "--cores", "500"]) == 0
    text = capsys.readouterr().out
    assert "wall time on 500 cores" in text and "assumptions:" in text and "exact_dedup *" in text
    priced = _estimate(capsys, sample_run, "--pages", 1_000_000, "--cores", 10, "--price-per-core-hour", 0.04)
    assert priced["money"] == pytest.approx(0.04 * large["core_hours"])
    assert dataprep_main(["estimate", str(sample_run), "--pages", "1000000", "--price-per-core-hour", "0.04"]) == 0
    assert f"money: {priced['money']:,.2f} for " in capsys.readouterr().out


def test_a_listing_on_s3_without_credentials_is_one_line(sample_run, capsys, monkeypatch, tmp_path):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name in ("AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE"):
        monkeypatch.setenv(name, str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance role to ask for
    listing = "s3://commoncrawl/crawl-data/CC-MAIN-2024-22/warc.paths.gz"
    assert dataprep_main(["estimate", str(sample_run), "--listing", listing]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(f"dataprep estimate: error: cannot read input '{listing}'")
    assert "https://data.commoncrawl.org/crawl-data/CC-MAIN-2024-22/warc.paths.gz" in err


def test_two_samples_separate_fixed_costs(spark, shared_data, sample_run, capsys, tmp_path):
    smaller = _run(spark, _files(shared_data)[:1], tmp_path / "smaller")
    capsys.readouterr()  # the run's own output
    one = _estimate(capsys, sample_run, "--pages", 1_000_000)
    two = _estimate(capsys, smaller, sample_run, "--pages", 1_000_000)
    assert two["sample_pages"] == one["sample_pages"]  # the larger sample gives the funnel
    assert [s["docs_kept"] for s in two["stages"]] == [s["docs_kept"] for s in one["stages"]]
    assert 0 < two["core_hours"] and all(s["core_hours"] >= 0 and s["core_ms_per_page"] > 0 for s in two["stages"])
    # both runs recorded their whole-corpus steps' fixed costs: one sample is enough to separate them
    assert not any("one sample" in a for a in one["assumptions"] + two["assumptions"])


def test_fixed_cost_per_worker_is_paid_once_per_core():
    """A stage whose first batch per task loads a model: that cost is paid once per core of the crawl,
    the rest per document; a whole-corpus step costs its Spark tasks' CPU seconds, not its wall time."""
    from dataprep.core.estimate import Sample, estimate, worker_fixed_cost
    from dataprep.core.stats import StageStats

    # two tasks of 1,000 pages on 2 cores: 5 s of loading per worker, then 1 ms per page
    read = StageStats("read", docs_in=2000, docs_kept=2000, cpu_seconds=0.2)
    loads = StageStats(
        "url_filter",
        docs_in=2000,
        docs_kept=2000,
        cpu_seconds=2 * 5 + 2.0,
        first_batch_cpu_seconds=2 * 5 + 1.0,
        first_batch_docs=1000,
    )
    dedup = StageStats(
        "exact_dedup", docs_in=2000, docs_kept=1900, seconds=50.0, executor_seconds=6.0, executor_cpu_seconds=4.0
    )
    assert worker_fixed_cost(loads) == pytest.approx((10.0, 0.001))
    assert worker_fixed_cost(
        StageStats("x", docs_in=2000, cpu_seconds=2.0, first_batch_cpu_seconds=1.0, first_batch_docs=1000)
    ) == (0.0, 0.001)
    assert worker_fixed_cost(read) is None  # no first-batch figures: linear
    est = estimate([Sample([read, loads, dedup], cores=2)], 200_000, 8, {"exact_dedup"})
    hours = {s.stage: s.core_hours for s in est.stages}
    assert hours["url_filter"] * 3600 == pytest.approx(8 * 5 + 200.0)
    assert hours["exact_dedup"] * 3600 == pytest.approx(400.0) and hours["read"] * 3600 == pytest.approx(20.0)
    assert any("once per core" in a for a in est.assumptions)
    one_task = estimate(
        [Sample([read, loads, dedup], cores=2, tasks=1)], 200_000, 8, {"exact_dedup"}
    )  # one worker loaded it all
    assert one_task.stages[1].core_hours * 3600 == pytest.approx(8 * 10 + 200.0)


def test_fixed_cost_per_spark_task_is_paid_once():
    """A whole-corpus step's Spark tasks' own cost does not grow with pages; the rest of its executor CPU
    does. Stats written before the fixed cost was recorded project as before: linearly from one sample."""
    from dataprep.core.estimate import ONE_SAMPLE, Sample, estimate, task_fixed_cost
    from dataprep.core.stats import StageStats

    read = StageStats("read", docs_in=2000, docs_kept=2000, cpu_seconds=0.2)
    dedup = StageStats(
        "exact_dedup",
        docs_in=2000,
        docs_kept=1900,
        executor_seconds=6.0,
        executor_cpu_seconds=4.0,
        executor_fixed_cpu_seconds=3.0,
    )
    assert task_fixed_cost(dedup, 2000) == pytest.approx((3.0, 0.0005))
    est = estimate([Sample([read, dedup], cores=2)], 200_000, 8, {"exact_dedup"})
    assert est.stages[1].core_hours * 3600 == pytest.approx(3.0 + 100.0) and est.stages[
        1
    ].core_ms_per_page == pytest.approx(0.5)
    assert ONE_SAMPLE not in est.assumptions and any("paid once whatever the size" in a for a in est.assumptions)

    # the field survives stats.json and merging (per-task stats files of a step add up)
    saved = StageStats.from_dict(dedup.to_dict())
    assert saved.executor_fixed_cpu_seconds == 3.0
    assert StageStats("exact_dedup").merge(saved).merge(saved).executor_fixed_cpu_seconds == 6.0
    assert "executor_fixed_cpu_seconds" not in StageStats("exact_dedup", executor_seconds=1.0).to_dict()

    older = StageStats.from_dict({k: v for k, v in dedup.to_dict().items() if k != "executor_fixed_cpu_seconds"})
    assert task_fixed_cost(older, 2000) is None
    old = estimate([Sample([read, older], cores=2)], 200_000, 8, {"exact_dedup"})
    assert old.stages[1].core_hours * 3600 == pytest.approx(400.0) and ONE_SAMPLE in old.assumptions
    # two older samples of different sizes: the fit through them, as before
    smaller = StageStats("exact_dedup", docs_in=1000, docs_kept=950, executor_seconds=5.0, executor_cpu_seconds=3.5)
    small_read = StageStats("read", docs_in=1000, docs_kept=1000, cpu_seconds=0.1)
    fitted = estimate(
        [Sample([small_read, smaller], cores=2), Sample([read, older], cores=2)], 200_000, 8, {"exact_dedup"}
    )
    assert (
        fitted.stages[1].core_hours * 3600 == pytest.approx(3.0 + 0.0005 * 200_000)
        and ONE_SAMPLE not in fitted.assumptions
    )


def test_python_workers_fixed_cost_per_call(spark):
    """``timed`` hands every row on, and counts what a call costs before its documents (a model it loads)
    as fixed, but not a cost that grows with rows."""
    from pipelines.progress import _call_fixed_cost, python_cpu, timed

    def _burn(seconds: float) -> None:  # defined here: Spark's workers cannot import the test module
        end = time.process_time() + seconds
        while time.process_time() < end:
            pass

    def loads_then_passes(batches):
        _burn(0.3)  # loading a model, once per call
        yield from batches

    def per_row(batches):
        for rb in batches:
            _burn(0.0002 * rb.num_rows)
            yield rb

    for fn in (loads_then_passes, per_row):
        with python_cpu(spark) as cpu:
            df = spark.range(0, 4000, numPartitions=2).mapInArrow(timed(fn), "id long")
        assert sorted(row.id for row in df.collect()) == list(range(4000))
        assert 0 <= cpu.fixed <= cpu.value
        if fn is loads_then_passes:
            assert cpu.fixed >= 0.5  # two calls, 0.3 s each
        else:
            assert cpu.value >= 0.7 and cpu.fixed < 0.1 * cpu.value
    assert _call_fixed_cost(1.0, 1000, 0.5, 64) == pytest.approx(0.5 - 64 * 0.5 / 936)
    assert _call_fixed_cost(1.0, 64, 0.5, 64) == 0.0 and _call_fixed_cost(1.0, 1000, 0.0, 0) == 0.0
    assert _call_fixed_cost(1.0, 1000, 0.01, 64) == 0.0  # a head cheaper than its rows' share: nothing fixed


def test_bad_samples_are_named(spark, shared_data, sample_run, capsys, tmp_path):
    assert dataprep_main(["estimate", str(tmp_path / "nothing"), "--pages", "10"]) == 2
    assert "not the output of a finished `dataprep run`" in capsys.readouterr().err
    assert dataprep_main(["estimate", str(sample_run), "--pages", "0"]) == 2
    assert "pages must be positive" in capsys.readouterr().err

    metadata_only = shared_data / "warc/cc-main-2024-22-whirlwind/whirlwind.warc.wat.gz"  # records, no document
    config = load_config(
        {"input": {"paths": [str(metadata_only)]}, "output": {"dir": str(tmp_path / "out")}, "stages": STAGES[:1]}
    )
    with pytest.raises(NothingKept, match="the input holds no documents"):  # its stats are written first
        run_pipeline(config, spark=spark)
    assert dataprep_main(["estimate", str(tmp_path / "out" / "stats.json"), "--pages", "10"]) == 2
    assert "read no documents" in capsys.readouterr().err

    older = tmp_path / "older"
    older.mkdir()
    doc = json.loads((sample_run / "stats.json").read_text())
    del doc["cores"]  # a stats.json written before runs recorded their cores
    (older / "stats.json").write_text(json.dumps(doc))
    assert dataprep_main(["estimate", str(older), "--pages", "10"]) == 2
    assert "--sample-cores" in capsys.readouterr().err
    assert _estimate(capsys, older, "--pages", 10, "--sample-cores", 4)["sample_cores"] == 4


def test_first_step_task_function_does_not_grow_with_the_listing(spark, tmp_path):
    """Every first-step task deserialises its function: the task list travels as a broadcast instead."""
    from pyspark import cloudpickle

    from dataprep.readers import READ_SCHEMA
    from pipelines.steps import make_partition_fn, plan_steps

    config = load_config({"input": {"paths": ["x"]}, "stages": STAGES[:1]})
    step = plan_steps(config.stages)[0]

    def pickled(files: int) -> int:
        groups = spark.sparkContext.broadcast(
            [[f"s3://commoncrawl/crawl-data/CC-MAIN-2024-22/segments/{i}/warc/f.warc.gz"] for i in range(files)]
        )
        fn = make_partition_fn(
            step,
            step.stages,
            config.input,
            None,
            READ_SCHEMA,
            None,
            False,
            str(tmp_path),
            "fingerprint",
            groups,
            "zstd",
        )
        return len(cloudpickle.dumps(fn))

    assert abs(pickled(90_000) - pickled(10)) < 64
