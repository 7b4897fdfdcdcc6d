"""What a run tells its user when it keeps nothing (its stats and table, then one line naming the stage),
and what its report may show: counts of redacted secrets, and examples of dropped documents with their
secrets and personal data replaced, never the values themselves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dataprep.core.config import load_config
from dataprep.report.build import build_report
from pipelines.cli import main as dataprep_main
from pipelines.pipeline_run import run_pipeline

JSONL = "documents/redpajama-c4-refined.jsonl"
# Planted in documents the run drops (German ones, langid keeps English) and in ones it keeps.
EMAIL, PHONE, AWS_KEY, GITHUB_TOKEN = (
    "anna.schmidt@beispiel-firma.de",
    "+49 30 12345678",
    "AKIA2E0A8F3B244C9986",
    "ghp_" + "x7Qm2Lr9Tz4Kp8Wn3Vb6Yc1Hd5Jf0Gs2Ae7U",
)
PASSWORD = 'db_password = "Tr0ub4dor&3xQ"'
GERMAN = (
    "Sehr geehrte Damen und Herren, wir freuen uns, Ihnen mitteilen zu können, dass die Sitzung des Vereins "
    "am kommenden Dienstag im großen Saal des Rathauses stattfindet. Bitte melden Sie sich rechtzeitig an. "
)


def _planted(shared_data: Path, tmp_path: Path) -> Path:
    english = [json.loads(line)["text"] for line in (shared_data / JSONL).open(encoding="utf-8")]
    docs = [
        {
            "text": f"Kontakt: {EMAIL}, Tel. {PHONE}. {AWS_KEY} {GITHUB_TOKEN} {PASSWORD}. " + GERMAN,
            "url": f"https://example.de/{i}",
        }
        for i in range(3)
    ]
    docs += [
        {"text": text + f"\nconfig: {PASSWORD}\naws = '{AWS_KEY}'", "url": f"https://example.com/{i}"}
        for i, text in enumerate(english)
    ]
    path = tmp_path / "planted.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return path


def test_a_run_that_keeps_nothing_writes_its_stats_then_names_the_stage(spark, shared_data, tmp_path, capsys):
    config = tmp_path / "german_only.yaml"
    config.write_text(
        json.dumps(
            {
                "input": {"paths": [str(shared_data / JSONL)]},
                "output": {"dir": str(tmp_path / "out")},
                "stages": [
                    {"stage": "langid", "languages": ["de"]},
                    {"stage": "tokenize", "train": {"vocab_size": 300}},
                ],
            }
        )
    )
    assert dataprep_main(["run", str(config)]) == 1
    printed = capsys.readouterr()
    assert len(printed.err.strip().splitlines()) == 1, printed.err
    assert (
        "stage langid dropped all 10 documents" in printed.err
        and "10 langid:en" in printed.err
        and "Traceback" not in printed.err
    )
    assert "langid" in printed.out and "docs in" in printed.out  # the funnel table, before the failure
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert [(s["stage"], s["docs_in"], s["docs_kept"]) for s in stats["stages"]] == [
        ("read", 10, 10),
        ("langid", 10, 0),
    ]
    assert not (tmp_path / "out" / "corpus").exists()


@pytest.fixture(scope="module")
def planted_run(spark, shared_data, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("planted")
    config = load_config(
        {
            "input": {"paths": [str(_planted(shared_data, tmp))]},
            "output": {"dir": str(tmp / "out"), "write_dropped": True},
            "stages": [{"stage": "langid", "languages": ["en"]}, {"stage": "code_secrets"}],
        }
    )
    result = run_pipeline(config, spark=spark)
    return tmp / "out", {s.stage: s for s in result.stats}


def test_code_secrets_counts_what_it_redacts(planted_run):
    _, stats = planted_run
    assert stats["code_secrets"].counters == {"redacted:aws_key": 10, "redacted:password": 10}
    assert stats["langid"].dropped == {"langid:de": 3}


def test_the_report_shows_redactions_and_never_a_secret_or_pii_of_a_dropped_document(planted_run):
    out, _ = planted_run
    html, md = build_report(str(out))
    for path in (html, md):
        text = Path(path).read_text(encoding="utf-8")
        assert "langid:de" in text and "Kontakt:" in text  # the dropped documents are shown...
        for value in (EMAIL, PHONE, AWS_KEY, GITHUB_TOKEN, "Tr0ub4dor", "beispiel-firma"):
            assert value not in text, (path, value)  # ...without what they hide
        assert "&lt;EMAIL&gt;" in text or "<EMAIL>" in text
        assert "Redactions" in text and "redacted" in text
