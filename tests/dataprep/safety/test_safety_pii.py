"""PII stage: detection per type, hard negatives, redaction, counts, dropping PII-heavy pages, and linear
time on 10 MB and digit-only text (the labelled set's precision/recall: tests/bench/test_pii_eval.py)."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from dataprep.core.config import ConfigError, parse_stages
from dataprep.safety.pii import PiiScrubber, find_pii, redact
from dataprep.safety.pii_checks import cn_id_ok, iban_ok, luhn_ok


def _found(text: str) -> list[tuple[str, str]]:
    return [(text[s.start : s.end], s.type) for s in find_pii(text)]


def _batch(texts: list[str | None]) -> pa.Table:
    n = len(texts)
    return pa.table({"id": [str(i) for i in range(n)], "url": [None] * n, "text": pa.array(texts, pa.string())})


@pytest.mark.parametrize(
    "text, expected",
    [
        ("mail jane.doe+x@mail.example.co.uk now", [("jane.doe+x@mail.example.co.uk", "email")]),
        ("请联系zhangwei@163.com。", [("zhangwei@163.com", "email")]),
        ("Call +49 (0)30 1234567 today", [("+49 (0)30 1234567", "phone")]),
        ("Office (212) 736-5000.", [("(212) 736-5000", "phone")]),
        ("手机13812345678，谢谢", [("13812345678", "phone")]),
        ("Tél. 04.72.10.30.30", [("04.72.10.30.30", "phone")]),
        ("from 93.184.216.34 and 2606:4700:4700::1111", [("93.184.216.34", "ip"), ("2606:4700:4700::1111", "ip")]),
        ("card 4111 1111 1111 1111 ok", [("4111 1111 1111 1111", "credit_card")]),
        ("IBAN DE89 3704 0044 0532 0130 00, BIC", [("DE89 3704 0044 0532 0130 00", "iban")]),
        ("SSN 078-05-1120.", [("078-05-1120", "ssn")]),
        ("身份证11010519491231002X。", [("11010519491231002X", "cn_id")]),
    ],
)
def test_each_type_is_found(text, expected):
    assert _found(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "On 2023-10-05 at 14:30:45, 05.10.2023 and 10/05/2023",
        "version 2.4.1.3, Chrome/120.0.6099.109, Python 3.11.4",
        "Price $1,234.56, 1.299,00 €, ￥12,800元",
        "ISBN 978-3-16-148410-0, ISBN 0-306-40615-2, ISBN-13: 9780306406157",
        "Order #1234567890, Order No. 4532015112830366, 订单号：202310051234567890",
        "4111 1111 1111 1112 and 1234567890123456789012345678901234567890",
        "IBAN DE00 3704 0044 0532 0130 00; 110105194912310021; 000-12-3456",
        "private 192.168.1.1, 10.0.0.1, 127.0.0.1, 203.0.113.5, 2001:db8::1, fe80::1",
        "icon@2x.png, lodash@4.17.21, @handle",
    ],
)
def test_hard_negatives_are_left_alone(text):
    assert _found(text) == []


def test_checksums():
    assert luhn_ok("4111111111111111") and not luhn_ok("4111111111111112")
    assert iban_ok("GB82WEST12345698765432") and not iban_ok("GB82WEST12345698765431")
    assert cn_id_ok("11010519491231002X") and not cn_id_ok("110105194912310021")


@pytest.fixture
def scrubbed() -> tuple[object, object]:
    """Two emails and a phone number, a date, an empty text, a missing one and six emails, through the
    PII stage with at most five spans: the stage and its result."""
    texts = [
        "Write to a@b.com or c@d.org, call 030 1234567.",
        "nothing here, 2023-10-05",
        "",
        None,
        "a@b.com c@b.com d@b.com e@b.com f@b.com g@b.com",
    ]
    stage = PiiScrubber(max_spans=5)
    return stage, stage.apply(_batch(texts))


def test_the_pii_stage_redacts_each_span(scrubbed):
    kept = scrubbed[1].kept.to_pylist()
    assert [r["text"] for r in kept[:2]] == ["Write to <EMAIL> or <EMAIL>, call <PHONE>.", "nothing here, 2023-10-05"]
    assert kept[3]["text"] is None


def test_the_pii_stage_counts_spans_by_type(scrubbed):
    stage, result = scrubbed
    kept = result.kept.to_pylist()
    assert (kept[0]["pii_email"], kept[0]["pii_phone"], kept[0]["pii_count"]) == (2, 1, 3)
    assert kept[1]["pii_count"] == 0 and kept[2]["pii_count"] == 0
    assert stage.output_schema(_batch(["x"]).schema) == result.kept.schema


def test_the_pii_stage_drops_a_document_of_too_many_spans(scrubbed):
    assert scrubbed[1].dropped.column("drop_reason").to_pylist() == ["pii:too_many_spans"]


def test_count_only_mode_counts_only_the_selected_types():
    text = "a@b.com 030 1234567"
    out, _ = PiiScrubber(redact=False, types=["email"]).process(_batch([text]))
    row = out.to_pylist()[0]
    assert row["text"] == text and row["pii_email"] == 1 and row["pii_phone"] == 0


def test_the_pii_config_rejects_an_unknown_type():
    with pytest.raises(ConfigError, match="types"):
        parse_stages([{"stage": "pii", "types": ["passport"]}])


def test_the_pii_config_rejects_an_unknown_key():
    with pytest.raises(ConfigError, match="max_span"):
        parse_stages([{"stage": "pii", "max_span": 3}])


def test_redact_keeps_surrounding_text():
    text = "x a@b.com y"
    assert redact(text, find_pii(text)) == "x <EMAIL> y"


def _seconds(text: str) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        find_pii(text)
        best = min(best, time.perf_counter() - t0)
    return best


@pytest.mark.parametrize("unit", ["1234567890", "1 2 3 4 5 ", "1.2.3.4.", "+1 2 ", "a@b.", "1:2::3:", "Tel: 0 "])
def test_time_grows_linearly_on_pathological_text(unit):
    """Four times the input must cost about four times the time; catastrophic backtracking would cost
    sixteen times. The wide gap keeps the check meaningful on a busy machine (best of 3 runs each)."""
    small = unit * (40_000 // len(unit))
    t1, t4 = _seconds(small), _seconds(small * 4)
    assert t4 / t1 < 9, (unit, t1, t4)


def test_ten_megabytes_of_text_with_pii():
    prose = "The council met on 2023-10-05 and agreed a budget of $1,250,000 for the new library. " * 4
    paragraph = prose + "Contact Jane at jane@example.com or +44 20 7946 0958.\n"
    text = paragraph * (10_000_000 // len(paragraph))
    out, reasons = PiiScrubber().process(_batch([text]))
    row = out.to_pylist()[0]
    assert reasons == [None] and row["pii_email"] == row["pii_phone"] == text.count("jane@")
    assert "jane@" not in row["text"] and "2023-10-05" in row["text"]
