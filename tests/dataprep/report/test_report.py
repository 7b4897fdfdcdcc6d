"""`dataprep report`: the sections follow what a run produced, the numbers match its stats, and the page
renders in headless Chromium with its charts."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataprep.core.config import load_config, parse_stages
from dataprep.core.runner import run_stages
from dataprep.core.stage import DOC_SCHEMA, DROP_REASON, DROP_STAGE
from dataprep.core.stats import StageStats, save_json
from dataprep.report.build import build_report
from pipelines.cli import main as dataprep
from pipelines.pipeline_run import run_pipeline

CORE_SECTIONS = ["Summary", "Removal funnel per stage", "Removal per rule", "Languages", "Document length"]
ATTRIBUTE_SECTIONS = ["Perplexity", "Duplicate clusters", "PII", "Toxicity", "Token shards"]
TAB_GREEN = np.array([44, 160, 44]) / 255  # the funnel chart's "kept" bars


def _chromium() -> str:
    """Debian's chromium (`apt-get install -y chromium`); in CI its absence fails the test."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: apt-get update && apt-get install -y chromium")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    return path


def _headless(chromium: str, page: Path, *args: str) -> subprocess.CompletedProcess:
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
    ]
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [chromium, *flags, f"--user-data-dir={profile}", *args, page.as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )


def _sections(md: str) -> list[str]:
    return re.findall(r"^## (.+)$", md, flags=re.M)


def _train_run(run_dir: Path) -> None:
    """A metrics file written by the trainer's own logger: 12 training steps, validation every 4."""
    import torch

    from pretrain.components.metrics import MetricsLogger

    log = MetricsLogger(
        str(run_dir), "metrics.jsonl", None, flops_per_token=6e6, world_size=1, device=torch.device("cpu")
    )
    for step in range(1, 13):
        log.count_tokens(4096)
        log.log_train(step, loss=7.0 - 0.3 * step, lr=1e-3, grad_norm=1.0, tokens=4096 * step)
        if step % 4 == 0:
            log.write({"kind": "val", "step": step, "val_loss": 7.2 - 0.25 * step})
    log.close()


def test_report_of_a_spark_run_renders_in_chromium(spark, shared_data, tmp_path, capsys):
    chromium = _chromium()
    config = load_config(
        {
            "input": {
                "paths": [
                    str(shared_data / "warc" / "wget" / name)
                    for name in ("dolma-sample-0000.warc.gz", "IAH-urls-wget.warc.gz")
                ]
            },
            "output": {"dir": str(tmp_path / "out")},
            "stages": [{"stage": "extract"}, {"stage": "langid", "threshold": 0.3}],
        }
    )
    result = run_pipeline(config, spark=spark)
    _train_run(tmp_path / "run")
    assert dataprep(["report", str(tmp_path / "out"), "--train-run", str(tmp_path / "run")]) == 0
    folder = tmp_path / "out" / "report"
    assert f"report: {folder / 'report.html'}" in capsys.readouterr().out

    md = (folder / "report.md").read_text()
    assert _sections(md) == CORE_SECTIONS + ["Training"], "sections whose columns the run lacks must be left out"
    stats = {s.stage: s for s in result.stats}
    for name in ("read", "extract", "langid"):
        s = stats[name]
        assert f"| {name} | {s.docs_in:,} | {s.docs_kept:,} | {s.docs_dropped:,} |" in md
    assert f"- **documents kept**: {stats['langid'].docs_kept:,} " in md
    # records that are no documents are counted apart from the documents read (46 of the two files' 84 records)
    skipped = stats["read"].records_skipped
    assert skipped == {"metadata": 1, "request": 38, "resource": 5, "warcinfo": 2} and stats["read"].docs_in == 84 - 46
    assert "46 records that are no documents were skipped apart: metadata 1, request 38, resource 5, warcinfo 2." in md
    langs = pq.read_table(result.corpus_dir, columns=["lang"]).column("lang").to_pylist()
    assert f"| en | {langs.count('en'):,} |" in md
    assert "- **validation loss last / best**: 4.2000 / 4.2000 (step 12)" in md

    page = (folder / "report.html").read_text()
    images = re.findall(r'<img src="([^"]+)"', page)
    assert {"funnel.png", "rules.png", "languages.png", "lengths.png", "training.png"} <= set(images)
    assert all((folder / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for name in images)

    dom = _headless(chromium, folder / "report.html", "--dump-dom").stdout
    assert all(f"<h2>{title}</h2>" in dom for title in CORE_SECTIONS + ["Training"])
    _headless(chromium, folder / "report.html", f"--screenshot={tmp_path / 'shot.png'}", "--window-size=1280,2000")
    import matplotlib.image

    shot = matplotlib.image.imread(tmp_path / "shot.png")[..., :3]
    assert shot.shape[:2] == (2000, 1280) and shot.std() > 0.05, "the screenshot is blank"
    green = np.abs(shot - TAB_GREEN).max(axis=-1) < 0.03
    assert green.sum() > 2000, "the funnel chart did not load into the page"


# -- every attribute section, from stages run in memory on real documents ---------------------------


def _documents(shared_data: Path) -> pa.Table:
    """Real Common Crawl documents, plus exact and near copies (for dedup) and a German and a French
    page built from lingua sentences (for the language chart)."""
    texts = []
    for path in sorted((shared_data / "documents").iterdir()):
        with (gzip.open if path.suffix == ".gz" else open)(path, "rt", encoding="utf-8") as fh:
            texts += [json.loads(line)["text"] for line in fh if line.strip()]
    texts += [texts[0], texts[0], texts[1].replace(" the ", " a ", 1)]
    sentences = [
        json.loads(line) for line in (shared_data / "langid" / "lingua-sentences-75langs-300each.jsonl").open()
    ]
    texts += [" ".join(s["text"] for s in sentences if s["lang"] == lang)[:5000] for lang in ("de", "fr")]
    urls = [f"https://example.org/{i}" for i in range(len(texts))]
    urls[-5] = "https://example.org/<script>alert(1)</script>"  # an exact copy: dropped, shown as an example
    return pa.table(
        [
            [f"doc-{i:03d}" for i in range(len(texts))],
            urls,
            [None] * len(texts),
            ["shared-documents"] * len(texts),
            texts,
        ],
        schema=DOC_SCHEMA,
    )


@pytest.fixture(scope="module")
def local_output(shared_data, tmp_path_factory) -> Path:
    """A pipeline output laid out as `dataprep run` writes it, from real stages run without Spark."""
    from dataprep.quality.perplexity import train_model
    from dataprep.tokenize.tokenizer import train_tokenizer

    root = tmp_path_factory.mktemp("local")
    docs = _documents(shared_data)
    english = docs.column("text").to_pylist()[:50]
    train_model(english, "en", str(root / "ppl-en"), vocab_size=400)
    train_tokenizer(english, str(root / "tok"), vocab_size=600)
    out = root / "out"
    stages = parse_stages(
        [
            {"stage": "langid", "threshold": 0.3},
            {"stage": "perplexity", "models": {"en": str(root / "ppl-en")}},
            {"stage": "pii"},
            {"stage": "toxicity", "action": "annotate"},
            {"stage": "exact_dedup"},
            {"stage": "minhash_dedup", "threshold": 0.7},
            {
                "stage": "tokenize",
                "tokenizer": str(root / "tok"),
                "output_dir": str(out / "steps" / "01_tokenize" / "shards"),
                "tokens_per_shard": 20_000,
            },
        ]
    )
    result, stats = run_stages(stages, docs)
    save_json(stats, str(out / "stats.json"), {"input_files": 6, "corpus": str(out / "corpus")})
    (out / "corpus").mkdir()
    half = result.kept.num_rows // 2
    pq.write_table(result.kept.slice(0, half), out / "corpus" / "part-0.parquet")
    pq.write_table(result.kept.slice(half), out / "corpus" / "part-1.parquet")
    (out / "steps" / "00_read-toxicity" / "data").mkdir(parents=True)
    dropped = result.dropped.select(["id", "url", DROP_STAGE, DROP_REASON])
    stats_row = pa.table(
        {
            "id": [None],
            "url": ["https://must-not-appear.example/"],
            DROP_STAGE: ["__stats__"],
            DROP_REASON: ["__stats__"],
        },
        schema=dropped.schema,
    )
    pq.write_table(
        pa.concat_tables([dropped, stats_row]), out / "steps" / "00_read-toxicity" / "data" / "part-0.parquet"
    )
    return out


def test_every_attribute_section_appears_with_the_corpus_numbers(local_output, tmp_path):
    html_path, md_path = build_report(str(local_output), str(tmp_path / "report"))
    md = Path(md_path).read_text()
    assert _sections(md) == [
        *CORE_SECTIONS[:2],
        "Redactions",
        *CORE_SECTIONS[2:],
        *ATTRIBUTE_SECTIONS,
    ]  # the run has pii
    corpus = pq.read_table(local_output / "corpus")
    stats = {d["stage"]: d for d in json.loads((local_output / "stats.json").read_text())["stages"]}
    assert stats["exact_dedup"]["docs_dropped"] == 2 and stats["minhash_dedup"]["docs_dropped"] >= 1
    assert "| exact_dedup | exact_duplicate | 2 |" in md
    assert "must-not-appear" not in md, "internal stats rows are not dropped documents"
    assert "https://example.org/" in md  # example URLs of the dropped documents
    emails = sum(n or 0 for n in corpus.column("pii_email").to_pylist())
    assert re.search(rf"^\| email \| {emails:,} \|", md, flags=re.M)
    assert re.search(
        rf"^\| pii \| email \| redacted \| {emails:,} \|", md, flags=re.M
    )  # the stage's own count, the same
    assert "| exact duplicate cluster size | clusters |" in md and re.search(r"^\| 3 \| 1 \| 2 \|", md, flags=re.M)
    manifest = json.loads(next(local_output.glob("steps/*/shards/manifest.json")).read_text())
    assert (
        f"{manifest['tokens']:,} tokens, {manifest['documents']:,} documents in {manifest['num_shards']} shards" in md
    )
    assert f"| all | {manifest['documents']:,} | {manifest['tokens']:,} |" in md
    unscored = sum(1 for lang in corpus.column("lang").to_pylist() if lang != "en")
    assert unscored >= 2 and f"{unscored} of {corpus.num_rows} documents are not scored" in md
    page = Path(html_path).read_text()
    assert all((tmp_path / "report" / name).exists() for name in re.findall(r'<img src="([^"]+)"', page))
    assert "<script>" not in page and "&lt;script&gt;alert(1)" in page
    assert "<script>" not in md and "&lt;script&gt;alert(1)" in md


@pytest.fixture(scope="module")
def sampled_damaged_report(local_output, tmp_path_factory) -> tuple[str, int]:
    """The report, sampled to 5 documents, of a copy of the output whose shard manifest is truncated:
    its markdown and the corpus's size."""
    root = tmp_path_factory.mktemp("damaged")
    out = root / "out"
    shutil.copytree(local_output, out)
    (out / "steps" / "02_tokenize" / "shards").mkdir(parents=True)
    (out / "steps" / "02_tokenize" / "shards" / "manifest.json").write_text("{ truncated")
    total = pq.read_table(out / "corpus").num_rows
    return Path(build_report(str(out), str(root / "r"), max_docs=5)[1]).read_text(), total


def test_the_report_samples_at_most_max_docs(sampled_damaged_report):
    md, total = sampled_damaged_report
    assert f"Distributions below are over 5 of the {total} cleaned documents" in md
    assert re.search(r"^\| chars \| 5 \|", md, flags=re.M)


def test_the_report_names_an_unreadable_manifest(sampled_damaged_report):
    md, _ = sampled_damaged_report
    assert "unreadable manifest" in md and "is not valid JSON" in md


def test_the_report_of_an_output_without_its_corpus_says_so(local_output, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(local_output, out)
    (out / "steps" / "02_tokenize" / "shards").mkdir(parents=True)
    (out / "steps" / "02_tokenize" / "shards" / "manifest.json").write_text("{ truncated")
    shutil.rmtree(out / "corpus")
    md = Path(build_report(str(out), str(tmp_path / "r2"))[1]).read_text()
    assert "corpus/ is missing" in md and "Languages" not in _sections(md)


def test_bad_arguments_are_one_clear_line(tmp_path, capsys):
    assert dataprep(["report", str(tmp_path / "nowhere")]) == 2
    assert "stats.json not found" in capsys.readouterr().err
    out = tmp_path / "out"
    save_json([StageStats("read")], str(out / "stats.json"))
    assert dataprep(["report", str(out), "--train-run", str(tmp_path / "no-run")]) == 2
    assert "metrics.jsonl not found" in capsys.readouterr().err
    (tmp_path / "empty.jsonl").write_text("")
    assert dataprep(["report", str(out), "--train-run", str(tmp_path / "empty.jsonl")]) == 2
    assert "holds no training records" in capsys.readouterr().err
    # A run that kept nothing still gets a report; a stage with many rules lists its biggest ones.
    langid = StageStats("langid", docs_in=100, dropped=Counter({f"langid:x{i:02d}": 5 for i in range(20)}))
    save_json([StageStats("read"), langid], str(out / "stats.json"))
    assert dataprep(["report", str(out)]) == 0
    md = (out / "report" / "report.md").read_text()
    assert _sections(md) == ["Summary", "Removal funnel per stage", "Removal per rule"]
    assert "| langid | (5 other rules) | 25 | 25.0% |" in md and "langid:x14" in md and "langid:x15" not in md


def test_rule_examples_show_what_was_removed(local_output, tmp_path):
    """With the dropped text kept (output.write_dropped), each rule's examples show its start."""
    out = tmp_path / "out"
    shutil.copytree(local_output, out)
    stats = json.loads((out / "stats.json").read_text())
    stats["stages"].append(
        {
            **stats["stages"][-1],
            "stage": "gopher_quality",
            "docs_in": 2,
            "docs_dropped": 1,
            "docs_kept": 1,
            "dropped": {"gopher_below_alpha_threshold": 1},
            "dropped_bytes": {"gopher_below_alpha_threshold": 80},
        }
    )
    (out / "stats.json").write_text(json.dumps(stats))
    (out / "steps" / "03_quality" / "data").mkdir(parents=True)
    text = "Prices | 1.99 | 2.49 | 3.99 |\n" * 10
    pq.write_table(
        pa.table(
            {
                "url": ["https://shop.example/prices"],
                "text": [text],
                DROP_STAGE: ["gopher_quality"],
                DROP_REASON: ["gopher_below_alpha_threshold"],
            }
        ),
        out / "steps" / "03_quality" / "data" / "part-0.parquet",
    )
    md = Path(build_report(str(out), str(tmp_path / "r"))[1]).read_text()
    row = next(
        line
        for line in md.splitlines()
        if "gopher_below_alpha_threshold" in line and line.startswith("| gopher_quality")
    )
    assert "https://shop.example/prices: Prices \\| 1.99 \\| 2.49" in row and "…" in row
