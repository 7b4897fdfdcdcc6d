"""Fault injection: messy input and broken installs end in a counted drop with the good records kept,
or in a non-zero exit that names the cause; never in silent loss. Fixtures are written here
(``tests/support/fault_cases.py``, which ``bench/faults/bench_faults.py`` also times)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import fault_cases as cases
from dataprep.classify.langid import default_model_path
from dataprep.core import storage
from dataprep.core.config import ConfigError, load_config
from dataprep.core.stats import ErrorBudgetExceeded
from pipelines.commands import run as run_module
from pipelines.fail_fast import ERRORS_FILE
from pipelines.pipeline_run import NothingKept, run_pipeline
from pipelines.tasks import DONE_MARKER

ROOT = Path(__file__).resolve().parents[2]
ALL = [str(i) for i in range(cases.GOOD_PAGES)]


# -- WARC records with a wrong Content-Length -----------------------------------------------------


@pytest.mark.parametrize("gzipped", [False, True], ids=["warc", "warc.gz"])
@pytest.mark.parametrize(
    "length_error", [40, 5, 100_000, -10, -60], ids=["long", "long-by-5", "long-past-eof", "short", "short-by-60"]
)
@pytest.mark.parametrize("broken", [0, 2])
def test_a_bad_content_length_loses_only_its_record(tmp_path, gzipped, length_error, broken):
    outcome = cases.bad_content_length(tmp_path, length_error, broken, gzipped)
    assert outcome["kept"] == [i for i in ALL if i != str(broken)]
    assert outcome["dropped"] == {"error:bad_content_length": 1}
    assert not outcome["header_text_leaked"]


@pytest.mark.parametrize("gzipped", [False, True], ids=["warc", "warc.gz"])
def test_bad_content_length_on_the_last_record(tmp_path, gzipped):
    last = cases.GOOD_PAGES - 1
    short = cases.bad_content_length(tmp_path, -10, last, gzipped)
    assert short["kept"] == ALL[:-1] and short["dropped"] == {"error:bad_content_length": 1}
    long = cases.bad_content_length(tmp_path, 40, last, gzipped)  # runs past the end of the file
    assert long["kept"] == ALL[:-1] and long["dropped"] == {"error:truncated": 1}


def test_garbage_between_records_keeps_both_neighbours(tmp_path):
    records = [cases.response_record(i, cases.page(i)) for i in range(cases.GOOD_PAGES)]
    records.insert(3, b"\x00garbage that is no record\r\n\r\n")
    outcome = cases.read(cases.write_warc(tmp_path / "garbage.warc", records, False))
    assert outcome["kept"] == ALL
    assert outcome["dropped"] == {"error:malformed_record": 1}
    assert any("Invalid WARC header" in m for m in outcome["error_messages"])  # the message, not only the type


def test_read_counts_the_bytes_it_reads(tmp_path):
    outcome = cases.bad_content_length(tmp_path, 0, 0, True)
    assert outcome["kept"] == ALL and outcome["bytes_in"] >= sum(len(cases.page(i)) for i in range(cases.GOOD_PAGES))


def test_read_counts_empty_files(tmp_path):
    assert cases.empty_files(tmp_path) == {"empty_files": 2, "kept": 0}


# -- decoding and extraction ----------------------------------------------------------------------


def test_charset_lie_is_decoded_by_detection(tmp_path):
    outcome = cases.charset_lie(tmp_path)
    assert outcome["texts"][0].startswith("Café crème brûlée, naïve façade")
    assert outcome["bytes_in"] > 0  # extract counts the HTML it reads


def test_replacement_characters_drop_their_document_with_a_count(tmp_path):
    outcome = cases.replacement_chars(tmp_path)
    assert outcome["dropped"] == {"extract:replacement_chars": 1}
    assert outcome["counters"]["replacement_chars"] == 1
    assert len(outcome["texts"]) == 1 and "harbour" in outcome["texts"][0]


def test_trafilatura_time_limit_is_a_counted_drop(tmp_path):
    outcome = cases.trafilatura_timeout(tmp_path)
    assert outcome["dropped"] == {"extract:timeout": 1}
    assert outcome["counters"] == {"trafilatura_timeout": 1}
    assert len(outcome["texts"]) == 1 and "harbour" in outcome["texts"][0]


# -- configuration checks before Spark starts -----------------------------------------------------


def test_models_are_loaded_at_config_time(tmp_path):
    broken = tmp_path / "classifier.bin"
    broken.write_bytes(b"not a fastText model at all")
    with pytest.raises(ConfigError, match=r"stages\[1\] \(quality_classifier\).*not a usable fastText model"):
        load_config({"stages": [{"stage": "extract"}, {"stage": "quality_classifier", "model_path": str(broken)}]})
    with pytest.raises(ConfigError, match=r"stages\[0\] \(perplexity\).*no model.json"):
        load_config({"stages": [{"stage": "perplexity", "model_dir": str(tmp_path)}]})
    with pytest.raises(ConfigError, match=r"stages\[0\] \(tokenize\): no tokenizer in"):
        load_config({"stages": [{"stage": "tokenize", "tokenizer": str(tmp_path / "none")}]})
    with pytest.raises(ConfigError, match=r"stages\[0\] \(gopher_quality\): language: 'klingon'"):
        load_config({"stages": [{"stage": "gopher_quality", "language": "klingon"}]})


def test_a_text_stage_before_extract_on_warc_input_is_an_error():
    with pytest.raises(ConfigError, match=r"stages\[1\] \(gopher_quality\) reads the document text.*extract"):
        load_config(
            {
                "input": {"paths": ["crawl/*.warc.gz"]},
                "stages": [{"stage": "url_filter"}, {"stage": "gopher_quality"}, {"stage": "extract"}],
            }
        )
    load_config(
        {"input": {"paths": ["crawl/*.warc.wet.gz"]}, "stages": [{"stage": "gopher_quality"}]}
    )  # WET: text already
    load_config({"input": {"paths": ["crawl/*.warc.gz"]}, "stages": [{"stage": "url_filter"}, {"stage": "extract"}]})


def test_asset_paths_resolve_to_the_copy_shipped_with_the_job(tmp_path, monkeypatch):
    shipped = tmp_path / "spark-files"
    shipped.mkdir()
    shutil.copy(default_model_path(), shipped / "lid-driver-only.ftz")
    driver_path = "/driver/only/models/lid-driver-only.ftz"
    with pytest.raises(FileNotFoundError, match="was not shipped with the job"):
        storage.resolve_asset(driver_path)
    monkeypatch.setattr(storage, "ASSET_DIRS", [str(shipped)])
    assert storage.resolve_asset(driver_path) == str(shipped / "lid-driver-only.ftz")


# -- the error budget, on Spark -------------------------------------------------------------------


def _warc_input(tmp_path: Path) -> Path:
    return cases.write_warc(
        tmp_path / "input.warc.gz", [cases.response_record(i, cases.page(i)) for i in range(30)], True
    )


def _broken_model_config(tmp_path: Path, **budget) -> tuple[dict, Path]:
    """extract, exact_dedup (a step of its own), then langid on a model copy the test removes after the
    config is checked: the model 'missing on the executors'."""
    model = tmp_path / "models" / "lid.ftz"
    model.parent.mkdir(exist_ok=True)
    shutil.copy(default_model_path(), model)
    config = {
        "input": {"paths": [str(_warc_input(tmp_path))], "batch_size": 7},
        "output": {"dir": str(tmp_path / "out")},
        "error_budget": budget,
        "stages": [{"stage": "extract"}, {"stage": "exact_dedup"}, {"stage": "langid", "model_path": str(model)}],
    }
    return config, model


def test_a_step_failed_by_a_broken_stage_resumes_after_the_fix(spark, tmp_path, capsys):
    config, model = _broken_model_config(tmp_path)
    checked = load_config(config)
    hidden = model.with_suffix(".away")
    model.rename(hidden)
    with pytest.raises(ErrorBudgetExceeded, match=r"step 02_langid failed: langid \(30 of 30 documents\)"):
        run_pipeline(checked, spark=spark)
    steps = tmp_path / "out" / "steps"
    assert (steps / "00_read-extract" / DONE_MARKER).exists() and (steps / "01_exact_dedup" / DONE_MARKER).exists()
    assert not (steps / "02_langid" / DONE_MARKER).exists()  # no marker past the budget: a rerun redoes it
    errors = json.loads((steps / "02_langid" / ERRORS_FILE).read_text())["stages"][0]
    assert errors["errors"] == 30
    [message] = errors["error_messages"]
    assert message.startswith("MissingPath:") and "lid.ftz" in message and "not shipped with the job" in message
    sample = errors["error_samples"][0]
    assert sample["id"].startswith("urn:uuid:") and "Traceback" in sample["traceback"]
    printed = capsys.readouterr().err
    assert "FAILED, errors over budget" in printed and "first error: MissingPath" in printed
    assert not (tmp_path / "out" / "corpus").exists()

    hidden.rename(model)  # the fix; the rerun keeps the finished steps
    result = run_pipeline(load_config(config), spark=spark)
    assert result.skipped_steps == 2
    assert pq.read_table(result.corpus_dir).num_rows == 30


def test_errors_under_the_budget_are_counted_drops(spark, tmp_path):
    """Within the budget (here every document may fail) errors are counted drops and the step is done;
    as no document is left, the run then fails naming the stage."""
    config, model = _broken_model_config(tmp_path, max_fraction=1.0)
    checked = load_config(config)
    model.unlink()
    with pytest.raises(
        NothingKept, match="stage langid dropped all 30 documents it was given \\(30 error:MissingPath\\)"
    ):
        run_pipeline(checked, spark=spark)
    stats = {s["stage"]: s for s in json.loads((tmp_path / "out" / "stats.json").read_text())["stages"]}
    assert stats["langid"]["dropped"] == {"error:MissingPath": 30}
    assert (tmp_path / "out" / "steps" / "02_langid" / DONE_MARKER).exists()


def test_the_command_exits_non_zero_naming_the_cause(spark, tmp_path, monkeypatch, capsys):
    config, model = _broken_model_config(tmp_path)
    path = tmp_path / "job.json"
    path.write_text(json.dumps(config))

    def load_then_lose_the_model(*args, **kwargs):
        checked = load_config(*args, **kwargs)
        model.unlink()
        return checked

    monkeypatch.setattr(run_module, "load_config", load_then_lose_the_model)
    args = run_module.argparse.Namespace(config=str(path), input=None, output=None, master=None, force=False)
    assert run_module.main(args) == 1
    assert "step 02_langid failed: langid (30 of 30 documents)" in capsys.readouterr().err


def test_progress_stats_files_and_bytes(spark, tmp_path, capsys):
    good = _warc_input(tmp_path)
    (tmp_path / "empty.warc.gz").write_bytes(b"")
    config = load_config(
        {
            "input": {"paths": [str(good), str(tmp_path / "empty.warc.gz")]},
            "output": {"dir": str(tmp_path / "out")},
            "stages": [{"stage": "extract"}, {"stage": "langid"}],
        }
    )
    result = run_pipeline(config, spark=spark)
    printed = capsys.readouterr().out
    assert re.search(r"\[00_read-langid\] 2/2 files, 30 docs, [\d.]+k? docs/s", printed), printed
    stats = {s.stage: s for s in result.stats}
    assert stats["read"].counters["empty_files"] == 1
    assert stats["read"].bytes_in > 0 and stats["extract"].bytes_in > 0
    assert stats["langid"].docs_kept == 30  # languages: [] keeps every document
    step = tmp_path / "out" / "steps" / "00_read-langid"
    data = pq.read_table(step / "data")
    assert "__stats__" not in set(data.column("drop_stage").to_pylist()) and data.num_rows == 30
    assert len(list((step / "_stats").glob("part-*.json"))) == 2


def test_a_whole_input_without_documents_fails_after_its_stats(spark, tmp_path, caplog):
    """Input that reads but holds no document (here: only images) fails naming the stage that dropped
    them, after writing stats.json; input with nothing readable fails sooner
    (tests/dataprep/readers/test_readers.py)."""
    (tmp_path / "empty.warc.gz").write_bytes(b"")
    images = cases.write_warc(
        tmp_path / "images.warc",
        [cases.response_record(i, b"\x89PNG", headers="Content-Type: image/png") for i in range(3)],
        False,
    )
    config = load_config(
        {
            "input": {"paths": [str(tmp_path / "empty.warc.gz"), str(images)]},
            "output": {"dir": str(tmp_path / "out")},
            "stages": [{"stage": "extract"}],
        }
    )
    with pytest.raises(NothingKept, match="dropped all 3 documents"):
        run_pipeline(config, spark=spark)
    assert "1 input files are empty" in caplog.text and (tmp_path / "out" / "stats.json").exists()


def test_piping_into_head_prints_no_traceback():
    cmd = f"{sys.executable} -m pipelines.cli stages | head -1"
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.stdout.strip() and "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr
