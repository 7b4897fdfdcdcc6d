"""URL filter stage: shipped lists, UT1-layout folders from config, subdomains, URL prefixes, soft
words with a threshold, sub-words, allow-list, odd URLs; and all three safety stages in one Spark run."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataprep.core.config import ConfigError, load_config, parse_stages
from dataprep.safety.url_filter import UrlFilter


def _reasons(stage: UrlFilter, urls: list[str | None]) -> list[str | None]:
    batch = pa.table(
        {"id": [str(i) for i in range(len(urls))], "url": pa.array(urls, pa.string()), "text": ["x"] * len(urls)}
    )
    out, reasons = stage.process(batch)
    assert out.num_rows == len(urls)
    return reasons


def _ut1(root, category: str, **files: str):
    folder = root / category
    folder.mkdir(parents=True)
    for name, content in files.items():
        (folder / name).write_text(content, encoding="utf-8")
    return root


def test_shipped_url_lists_block_by_domain_subdomain_or_word():
    reasons = _reasons(
        UrlFilter(),
        [
            "https://www.pornhub.com/view?id=1",
            "http://de.xhamster.com/videos",
            "https://example.xxx/",
            "https://www.bet365.com/#/AS/B1/",
            "https://news.example.com/best-online-casino-bonus-2024",  # soft words: casino + bonus
            "https://cooking.example.com/hot-dog-recipes",
            "https://www.essex.gov.uk/sussex-middlesex",  # "sex" is soft and a sub-string only
            "https://blog.example.org/porn-addiction-recovery",  # hard word
            "https://museum.example.org/casino-royale-review",  # one soft word is not enough
            "https://notpornhub.com.example.net/",  # blocked domain as a label, not as a suffix
            None,
            "",
            "http://[::1",  # unparsable
        ],
    )
    assert reasons == [
        "url_blocklist:adult",
        "url_blocklist:adult",
        "url_blocklist:adult",
        "url_blocklist:gambling",
        "url_blocklist:gambling",
        None,
        None,
        "url_blocklist:adult",
        None,
        "url_blocklist:adult",  # sub-word "porn" in the squashed URL
        None,
        None,
        None,
    ]


def test_ut1_folders_in_the_config_block_their_selected_categories(tmp_path):
    root = tmp_path / "ut1"
    _ut1(root, "phishing", domains="evil-bank-login.com\n.www.fake-paypal.net\n", urls="freehost.org/~scam/\n")
    _ut1(root, "jobsearch", domains="jobs.example.com\n")
    (stage,) = parse_stages(
        [
            {
                "stage": "url_filter",
                "blocklists": [str(root)],
                "categories": ["phishing"],
                "use_default_lists": False,
                "soft_word_threshold": 1,
            }
        ]
    )
    assert _reasons(stage, [
        "https://secure.evil-bank-login.com/login",
        "http://FAKE-PAYPAL.NET:8080/x",
        "http://freehost.org/~scam/page.html",
        "http://freehost.org/~honest/page.html",
        "https://jobs.example.com/",  # category not selected
        "https://www.pornhub.com/",  # default lists switched off
    ]) == ["url_blocklist:phishing", "url_blocklist:phishing", "url_blocklist:phishing", None, None, None]  # fmt: skip
    everything = UrlFilter(blocklists=[str(root / "jobsearch")], categories=None, use_default_lists=False)
    assert _reasons(everything, ["https://jobs.example.com/a"]) == ["url_blocklist:jobsearch"]


def test_an_allowed_domain_passes_its_blocklist():
    stage = UrlFilter(allow_domains=["pornhub.com"])
    assert _reasons(stage, ["https://www.pornhub.com/press"]) == [None]


def test_a_missing_blocklist_or_a_misspelt_setting_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        parse_stages([{"stage": "url_filter", "blocklists": [str(tmp_path / "missing")]}])
    with pytest.raises(ConfigError, match="soft_word_treshold"):
        parse_stages([{"stage": "url_filter", "soft_word_treshold": 3}])


def test_all_safety_stages_in_one_spark_pipeline(spark, tmp_path):
    from pipelines.pipeline_run import run_pipeline

    docs = [
        {
            "id": "clean",
            "url": "https://gazette.example.com/library",
            "text": "The library reopened on Monday.\nVisitors queued early.",
        },
        {
            "id": "pii",
            "url": "https://club.example.org/contact",
            "text": "Write to anna.berg@example.se or call +46 8 123 456 78.\nIBAN SE45 5000 0000 0583 9825 7466.",
        },
        {
            "id": "toxic",
            "url": "https://forum.example.net/t/1",
            "text": "You fucking asshole, shut up.\nFuck you and your shit.",
        },
        {
            "id": "mixed",
            "url": "https://forum.example.net/t/2",
            "text": "Good question about tomatoes.\nFuck you, idiot.\nWater them daily.",
        },
        {"id": "adult", "url": "https://www.xvideos.com/video1", "text": "Some page text."},
    ]
    src = tmp_path / "docs.jsonl"
    src.write_text("\n".join(json.dumps(d) for d in docs) + "\n", encoding="utf-8")
    config = load_config(
        {
            "input": {"paths": [str(src)], "format": "jsonl"},
            "output": {"dir": str(tmp_path / "out")},
            "stages": [{"stage": "url_filter"}, {"stage": "toxicity", "action": "remove_lines"}, {"stage": "pii"}],
        }
    )
    result = run_pipeline(config, spark=spark)
    rows = {r["id"]: r for r in pq.read_table(result.corpus_dir).to_pylist()}
    assert set(rows) == {"clean", "pii", "mixed"}
    assert rows["pii"]["text"] == "Write to <EMAIL> or call <PHONE>.\nIBAN <IBAN>."
    assert (rows["pii"]["pii_email"], rows["pii"]["pii_phone"], rows["pii"]["pii_iban"], rows["pii"]["pii_count"]) == (
        1,
        1,
        1,
        3,
    )
    assert rows["mixed"]["text"] == "Good question about tomatoes.\nWater them daily."
    stats = {s.stage: s for s in result.stats}
    assert stats["url_filter"].dropped == {"url_blocklist:adult": 1}
    assert stats["toxicity"].dropped == {"toxicity:all_removed": 1}
    assert stats["pii"].docs_in == 3
