"""The demo WARC: valid records, the promised categories, real encodings and a usable PII registry."""

from __future__ import annotations

import html
import ipaddress
import zlib
from collections import Counter
from pathlib import Path

import pytest
from fastwarc.warc import ArchiveIterator, WarcRecordType

from dataprep.demo import corpus as demo
from dataprep.demo import pages as demo_pages
from pipelines.cli import main as dataprep_main

EXPECTED = {
    "good": 40,
    "pii": 6,
    "boilerplate": 8,
    "spam": 5,
    "toxic": 3,
    "blocked_url": 3,
    "near_duplicate": 6,
    "exact_duplicate": 2,
    "non_html": 2,
    "revisit": 1,
}


@pytest.fixture(scope="module")
def warc(tmp_path_factory) -> tuple[Path, dict]:
    path = tmp_path_factory.mktemp("demo") / demo.FILENAME
    return path, demo.write_demo_warc(str(path))


def _responses(path: Path) -> dict[str, tuple]:
    """url -> (declared charset, content type, payload bytes) for every response record."""
    out = {}
    with open(path, "rb") as fh:
        for rec in ArchiveIterator(fh, record_types=WarcRecordType.response):
            assert rec.verify_payload_digest(), rec.headers["WARC-Target-URI"]
            out[rec.headers["WARC-Target-URI"]] = (rec.http_charset, rec.http_content_type, rec.reader.read())
    return out


def test_counts_match_the_records(warc):
    path, counts = warc
    assert counts == EXPECTED
    pages = {p.url: p.category for p in demo_pages.load_pages()}
    found = Counter()
    for url, (_, content_type, _) in _responses(path).items():
        found[pages[url] if content_type == "text/html" else "non_html"] += 1
    with open(path, "rb") as fh:
        found["revisit"] = sum(1 for _ in ArchiveIterator(fh, record_types=WarcRecordType.revisit))
    assert dict(found) == EXPECTED


def test_every_record_parses_one_gzip_member_each(warc):
    path, _ = warc
    data = path.read_bytes()
    types, ids, concurrent = Counter(), set(), []
    with open(path, "rb") as fh:
        for rec in ArchiveIterator(fh, parse_http=False):
            assert rec.headers["WARC-Type"] and rec.verify_block_digest(), rec.record_id
            types[str(rec.record_type).split(".")[-1]] += 1
            ids.add(rec.record_id)
            if rec.record_type == WarcRecordType.response:
                concurrent.append(rec.headers["WARC-Concurrent-To"])
    pages = sum(v for k, v in EXPECTED.items() if k != "revisit")
    assert types == {"warcinfo": 1, "request": pages, "response": pages, "revisit": 1}
    assert len(ids) == sum(types.values())  # record ids are unique
    assert set(concurrent) <= ids  # each response points at its request
    members, rest = 0, data
    while rest:  # count gzip members: Common Crawl readers expect one per record
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        d.decompress(rest)
        rest, members = d.unused_data, members + 1
    assert members == sum(types.values())


def test_pages_are_served_in_their_declared_encodings(warc):
    path, _ = warc
    responses = _responses(path)
    charsets = Counter()
    for page in demo_pages.load_pages():
        declared, content_type, body = responses[page.url]
        assert content_type == "text/html"
        assert declared == (page.charset.lower() if page.header_charset else None), page.url
        assert f'<meta charset="{page.charset}">' in body.decode(page.charset)
        text = body.decode(page.charset)  # strict: the bytes really are in that charset
        first_paragraph = page.text.split("\n\n")[0].strip() if page.text else page.title
        assert html.escape(first_paragraph.splitlines()[0]) in text, page.url
        if page.charset != "utf-8":
            with pytest.raises(UnicodeDecodeError):
                body.decode("utf-8")
        charsets[page.charset] += 1
    assert charsets["windows-1251"] == 2 and charsets["gbk"] == 1
    assert any(not p.header_charset for p in demo_pages.load_pages())  # one page declares it only in <meta>
    non_html = {ct for _, ct, _ in responses.values()} - {"text/html"}
    assert non_html == {"image/png", "application/pdf"}
    png = responses["https://www.riverside-gazette.com/static/img/logo.png"][2]
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and png.endswith(b"IEND\xaeB`\x82")


def _luhn_ok(number: str) -> bool:
    digits = [int(c) for c in number if c.isdigit()][::-1]
    return sum(d if i % 2 == 0 else (d * 2 - 9 if d > 4 else d * 2) for i, d in enumerate(digits)) % 10 == 0


def _iban_ok(iban: str) -> bool:
    s = iban.replace(" ", "")
    return int("".join(str(int(c, 36)) for c in s[4:] + s[:4])) % 97 == 1


def _cn_id_ok(number: str) -> bool:
    weights = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2]
    return len(number) == 18 and "10X98765432"[sum(int(a) * w for a, w in zip(number, weights)) % 11] == number[-1]


def test_pii_registry_covers_every_kind():
    kinds = Counter(kind for _, kind, _ in demo_pages.planted_pii())
    assert set(kinds) == {"email", "phone", "ipv4", "ipv6", "credit_card", "iban", "us_ssn", "cn_id"}


def test_each_planted_pii_value_is_valid_on_a_pii_page(warc):
    path, _ = warc
    planted = demo_pages.planted_pii()
    validators = {
        "credit_card": _luhn_ok,
        "iban": _iban_ok,
        "cn_id": _cn_id_ok,
        "ipv4": lambda v: ipaddress.ip_address(v).is_global,
        "ipv6": lambda v: ipaddress.ip_address(v).is_global,
    }
    responses = _responses(path)
    pages = {p.url: p for p in demo_pages.load_pages()}
    for url, kind, value in planted:
        assert validators.get(kind, bool)(value), (kind, value)
        assert pages[url].category == "pii"
        assert value in responses[url][2].decode(pages[url].charset), (url, value)


def test_texts_have_the_promised_shape():
    pages = demo_pages.load_pages()
    good = [p for p in pages if p.category == "good"]
    langs = Counter(p.lang for p in good)
    assert langs == {"en": 20, "de": 5, "zh": 5, "fr": 4, "es": 4, "ru": 2}
    for page in good:
        size = len(page.text) // 2 if page.lang == "zh" else len(page.text.split())  # ~2 Chinese chars a word
        assert 250 <= size <= 600, (page.url, size)
    by_url = {p.url: p for p in pages}
    for page in pages:
        if page.category == "near_duplicate":
            original = by_url[page.source]
            assert page.text != original.text and page.site != original.site
            changed = set(original.text.split()) ^ set(page.text.split())
            assert 0 < len(changed) <= 20, page.url
        if page.category == "exact_duplicate":
            assert page.text == by_url[page.source].text and page.url != page.source
    assert sum(f.stat().st_size for f in demo_pages.ASSETS.rglob("*") if f.is_file()) < 1_000_000


def test_bad_asset_is_a_clear_error():
    page = demo_pages.DemoPage(
        url="https://x.example/",
        category="pii",
        lang="en",
        site="X",
        title="T",
        text="No data here.",
        pii=(("email", "a@b.example"),),
    )
    with pytest.raises(ValueError, match="planted email"):
        demo_pages._validate([page])


def test_cli_writes_the_same_bytes(tmp_path, warc, capsys):
    assert dataprep_main(["demo-data", "--output", str(tmp_path)]) == 0
    assert (tmp_path / demo.FILENAME).read_bytes() == warc[0].read_bytes()  # reproducible
    assert "40 good" in capsys.readouterr().out


def _demo_array(name: str) -> list[str]:
    """A ``NAME=(...)`` line of scripts/demo.sh, as arguments."""
    import re
    import shlex

    script = (Path(__file__).resolve().parents[2] / "scripts" / "demo.sh").read_text()
    return shlex.split(re.search(rf"^{name}=\((.*)\)$", script, re.MULTILINE).group(1))


@pytest.mark.slow
@pytest.mark.usefixtures("one_torch_thread")
def test_the_demos_model_learns(tmp_path, monkeypatch, capsys):
    """The demo's training steps (scripts/demo.sh: epochs within what repetition pays for, its plan shape and
    training settings) on its good pages, tokenized as its pipeline does: the model handed over is within 2%
    of the lowest validation loss and 0.2 nats below the first, the run stops near its best, and the demo's
    task scores it."""
    import json

    import pyarrow as pa

    from dataprep.tokenize.stage import Tokenize, TokenizerTraining
    from pretrain.cli import main as pretrain_main
    from pretrain.components.metrics import read_metrics
    from pretrain.planning.data_constrained import R_D_STAR

    root = Path(__file__).resolve().parents[2]
    texts = [p.text for p in demo_pages.load_pages("good")]
    shards = tmp_path / "shards"
    Tokenize(
        tokenizer=str(tmp_path / "tokenizer"),
        output_dir=str(shards),
        tokens_per_shard=20000,
        train=TokenizerTraining(vocab_size=2000),
    ).run_local(pa.table({"text": texts}))
    assert pretrain_main(["budget", "--model", "tiny", "--data", str(shards), "--method", "approach3", "--json"]) == 0
    chinchilla = json.loads(capsys.readouterr().out)["data_constrained"]["chinchilla"]["epochs"]
    epochs = round(min(chinchilla, R_D_STAR))
    assert chinchilla > 50 and epochs == 15  # the corpus, not the compute, limits this model
    run = tmp_path / "train"
    assert (
        pretrain_main(
            [
                "plan",
                "tiny",
                "--gpus",
                "1",
                "--gpu",
                "cpu",
                "--peak-flops",
                "1e11",
                "--precision",
                "fp32",
                *_demo_array("PLAN_SHAPE"),
                "--epochs",
                str(epochs),
                "--data",
                str(shards),
                "--run-dir",
                str(run),
                "--output",
                str(tmp_path / "train.yaml"),
            ]
        )
        == 0
    )
    monkeypatch.chdir(root)  # the task file names its items from the checkout's root, as the demo runs
    assert pretrain_main(["train", str(tmp_path / "train.yaml"), *_demo_array("TRAIN_SETTINGS")]) == 0
    records = read_metrics(str(run / "metrics.jsonl"))
    val = [r["val_loss"] for r in records if r["kind"] == "val" and r["step"] > 0]
    assert [r["step"] for r in records if r["kind"] == "eval"][:2] == [30, 60]  # the task, in the loop
    capsys.readouterr()
    assert pretrain_main(["eval", str(run), "--json"]) == 0  # the run's own task, as the demo runs it
    result = json.loads(capsys.readouterr().out)
    assert abs(result["loss"] - min(val)) <= 0.02 * min(val), (result["loss"], val)
    assert result["loss"] <= val[0] - 0.2, (result["loss"], val)
    assert val[-1] <= 1.1 * min(val), val
    assert 0 <= result["tasks"]["demo_cloze"]["acc"] <= 1
