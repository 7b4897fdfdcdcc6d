"""The demo config end to end on Spark: every cleaning stage on the bundled sample crawl, checked against
what was planted in it (PII, toxic pages, blocked hosts, duplicates, boilerplate)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dataprep.core.config import check_stages, load_config
from dataprep.demo.corpus import write_demo_warc, write_reference
from dataprep.demo.pages import load_pages, planted_pii
from dataprep.tokenize.manifest import load_manifest
from pipelines.cli import main as dataprep_cli
from pipelines.pipeline_run import run_pipeline

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def demo_run(spark, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("demo")
    warc = tmp / "demo.warc.gz"
    write_demo_warc(str(warc))
    write_reference(str(tmp / "reference.jsonl"))
    cli = [
        "train-ppl-model",
        "--input",
        str(tmp / "reference.jsonl"),
        "--lang",
        "en",
        "--output",
        str(tmp / "ppl-en"),
        "--vocab-size",
        "500",
    ]
    assert dataprep_cli(cli) == 0
    overrides = {"input": {"paths": [str(warc)]}, "output": {"dir": str(tmp / "out")}}
    config = load_config(str(ROOT / "configs" / "pipeline" / "demo.yaml"), overrides, check_assets=False)
    for stage in config.stages:  # point the demo's relative paths into the temporary folder
        if stage.name == "perplexity":
            stage.models = {"en": str(tmp / "ppl-en")}
        if stage.name == "tokenize":
            stage.tokenizer, stage.output_dir = str(tmp / "tokenizer"), str(tmp / "shards")
    check_stages(config)  # the models it names now exist and load
    result = run_pipeline(config, spark=spark)
    corpus = pq.read_table(result.corpus_dir).to_pylist()
    return result, {doc["url"]: doc for doc in corpus}, tmp


def test_no_planted_pii_survives(demo_run):
    _, corpus, _ = demo_run
    text = "\n".join(doc["text"] for doc in corpus.values())
    leaked = [(url, kind, value) for url, kind, value in planted_pii() if value in text]
    assert not leaked
    pii_pages = [p.url for p in load_pages("pii")]
    assert [url for url in pii_pages if url not in corpus] == [], "PII pages are kept, redacted"
    assert all(corpus[u]["pii_count"] > 0 for u in pii_pages)


def test_toxic_blocked_spam_and_boilerplate_pages_are_dropped(demo_run):
    _, corpus, _ = demo_run
    for category in ("toxic", "blocked_url", "spam", "boilerplate"):
        kept = [p.url for p in load_pages(category) if p.url in corpus]
        assert not kept, f"{category} pages kept: {kept}"


def test_good_pages_in_every_language_are_kept(demo_run):
    """Every good page survives, itself or (when dedup kept the copy) exactly one of its duplicates."""
    _, corpus, _ = demo_run
    good = load_pages("good")
    copies = {p.url: [p.url] for p in good}
    for dup in load_pages("near_duplicate") + load_pages("exact_duplicate"):
        copies[dup.source].append(dup.url)
    assert {url: urls for url, urls in copies.items() if sum(u in corpus for u in urls) != 1} == {}
    assert {p.lang for p in good if p.url in corpus} == {"en", "de", "fr", "es", "zh", "ru"}


def test_duplicates_are_removed_once(demo_run):
    result, corpus, _ = demo_run
    stats = {s.stage: s for s in result.stats}
    assert stats["exact_dedup"].docs_dropped == len(load_pages("exact_duplicate"))
    assert stats["minhash_dedup"].docs_dropped == len(load_pages("near_duplicate"))
    texts = [doc["text"] for doc in corpus.values()]
    assert len(texts) == len(set(texts))


def test_the_shards_hold_the_whole_corpus(demo_run):
    _, corpus, tmp = demo_run
    manifest = load_manifest(str(tmp / "shards"))
    assert sum(s["documents"] for s in manifest["shards"]) == len(corpus)
    assert sum(s["tokens"] for s in manifest["shards"]) == sum(doc["num_tokens"] for doc in corpus.values())


def test_the_stats_hold_every_stage_of_a_funnel_that_adds_up(demo_run):
    _, _, tmp = demo_run
    saved = json.loads((tmp / "out" / "stats.json").read_text())
    names = [s["stage"] for s in saved["stages"]]
    assert names[:3] == ["read", "extract", "langid"] and names[-1] == "tokenize"
    for before, after in zip(saved["stages"][1:], saved["stages"][2:]):  # the funnel adds up
        assert before["docs_kept"] == after["docs_in"], (before["stage"], after["stage"])
    extract = next(s for s in saved["stages"] if s["stage"] == "extract")
    assert extract["counters"].get("routed_to_trafilatura", 0) > 0, "the demo's listing pages go to Trafilatura"


def test_lineage_from_the_demo_crawl_to_an_exported_model_and_back(demo_run, tmp_path, capsys):
    """The demo's shards -> a short training run -> a Hugging Face export: ``pretrain lineage`` on the export
    names the demo's WARC, the pipeline config and every shard's digests; ``--uses`` finds the run and the
    export from the pipeline output; the report of the pipeline shows the chain."""
    pytest.importorskip("torch")
    pytest.importorskip("tokenizers")
    from pretrain.cli import main as pretrain_main
    from pretrain.config.loading import load_train_config
    from pretrain.train import run
    from train_fixtures import tiny_config

    result, _, tmp = demo_run
    manifest = load_manifest(str(tmp / "shards"))
    made = manifest["pipeline_run"]
    warc = str(tmp / "demo.warc.gz")
    assert made["config"] == str(ROOT / "configs" / "pipeline" / "demo.yaml") and made["input_listing"]["names"] == [
        warc
    ]
    assert (
        made["input_listing"]["files"] == 1
        and made["output"] == str(tmp / "out")
        and made["code"]["package"] == "ccpretrain"
    )
    run(
        load_train_config(
            tiny_config(
                str(tmp / "shards"),
                tmp_path / "run",
                model={"vocab_size": "auto"},
                max_steps=2,
                device="cpu",
                checkpoint={"every_steps": 2, "keep_last": 1},
                log={"every_steps": 1, "val_every_steps": 2, "val_batches": 1},
            )
        )
    )
    assert pretrain_main(["export", str(tmp_path / "run"), "--output", str(tmp_path / "hf")]) == 0
    card = (tmp_path / "hf" / "README.md").read_text()
    assert warc in card and made["config"] in card and "validation loss at step 2" in card
    capsys.readouterr()

    assert pretrain_main(["lineage", str(tmp_path / "hf")]) == 0
    text = capsys.readouterr().out
    assert warc in text and made["config"] in text and made["identity"] in text
    for shard in manifest["shards"]:
        assert f"{shard['name']}: bin sha256 {shard['bin_sha256']}, idx sha256 {shard['idx_sha256']}" in text
    assert pretrain_main(["lineage", str(tmp_path / "run" / "checkpoints" / "step-00000002"), "--json"]) == 0
    source = json.loads(capsys.readouterr().out)["current"]["sources"][0]
    assert source["pipeline_run"] == made and source["shards"] == [
        {k: s[k] for k in ("name", "bin_sha256", "idx_sha256")} for s in manifest["shards"]
    ]

    assert pretrain_main(["lineage", "--uses", str(tmp / "out"), str(tmp_path), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["runs"]
    assert sorted((r["path"], r["exported"]) for r in found) == [
        (str(tmp_path / "hf"), True),
        (str(tmp_path / "run"), False),
    ]
    assert dataprep_cli(["report", str(tmp / "out"), "--train-run", str(tmp_path / "run")]) == 0
    report = (tmp / "out" / "report" / "report.md").read_text()
    assert f"trained on {tmp / 'shards'}" in report and made["identity"] in report
