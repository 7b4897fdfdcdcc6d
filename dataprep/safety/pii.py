"""PII redaction: find personal data in text and replace it with typed placeholders.

Each detector is a regex that proposes candidates and a check that confirms them: checksums, issuers'
formats and public addresses (``pii_checks``), digit counts and formats for phones. Dates, times,
versions, prices, ISBNs and order numbers are what a naive digit regex hits, so numeric candidates right
after a label such as "Order No." or "ISBN" are rejected. Every pattern is anchored on a boundary and
bounded, so time stays linear in text length.

Attributes: one int32 column per detector, ``pii_<type>`` (``pii_email``, ``pii_phone``, ...), plus
``pii_count``, their sum. Counts are taken before redaction; with ``redact: false`` text is unchanged.
Stats count ``redacted:<type>`` (``found:<type>`` with ``redact: false``) for the run's table and report.
"""

from __future__ import annotations

import re
from typing import Literal, NamedTuple

import pyarrow as pa
from pydantic import Field

from dataprep.core.registry import register
from dataprep.core.stage import DocumentStage, with_column
from dataprep.safety.pii_checks import card_ok, cn_id_ok, iban_end, ip_ok, ssn_ok

PiiType = Literal["email", "phone", "ip", "credit_card", "iban", "ssn", "cn_id"]
PLACEHOLDERS = {
    "email": "<EMAIL>",
    "phone": "<PHONE>",
    "ip": "<IP>",
    "credit_card": "<CREDIT_CARD>",
    "iban": "<IBAN>",
    "ssn": "<ID_NUMBER>",
    "cn_id": "<ID_NUMBER>",
}
# When candidates overlap, the stronger evidence wins (checksummed types before bare formats).
PRIORITY = ["email", "iban", "cn_id", "credit_card", "ssn", "ip", "phone"]
ALL_TYPES: list[str] = list(PLACEHOLDERS)


class Span(NamedTuple):
    start: int
    end: int
    type: str


# Boundaries: a candidate must not continue a longer alphanumeric or dotted/dashed digit chain.
_L = r"(?<![0-9A-Za-z])(?<![0-9][.\-/ ])"
_R = r"(?![0-9A-Za-z])(?![.\-/][0-9])"

_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9][A-Za-z0-9._%+\-]{0,63}@"
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+([A-Za-z]{2,24})(?![A-Za-z0-9\-])"
)
_FILE_TLDS = {"png", "jpg", "jpeg", "gif", "svg", "webp", "bmp", "ico", "css", "js", "min", "pdf"}

_SEP = r"(?:[ .\-/]| [/\-] )"  # one separator between digit groups: "030 123", "089 / 123", "010 - 123"
_PHONE_PATTERNS = [
    # international: +CC then digit groups, "(0)" allowed: +49 (0)30 1234567, +1.212.555.0199
    re.compile(r"(?<![0-9A-Za-z+])\+[1-9]\d{0,14}(?:(?:" + _SEP + r"|[ ]?\(\d{1,5}\)[ ]?)\d{1,10}){0,6}" + _R),
    # national with trunk 0: 030 1234567, 01 23 45 67 89, 010-12345678, 089 / 123 456 78
    re.compile(_L + r"0[1-9]\d{0,3}(" + _SEP + r")\d{2,8}(?:(?:\1|[ ])\d{2,8}){0,4}" + _R),
    # area code in parentheses: (030) 1234567, (11) 91234-5678, （021）12345678, (0 30) 12 34 56
    re.compile(_L + r"[(（]\d[\d ]{0,4}\d[)）][ ]?\d{2,8}(?:[ \-]\d{2,8}){0,4}" + _R),
    # North American: (555) 123-4567, 555-123-4567, 555.123.4567, 1-555-123-4567
    re.compile(_L + r"(?:1[ .\-])?(?:\([2-9]\d{2}\)[ ]?\d{3}[ .\-]|[2-9]\d{2}([ .\-])\d{3}\1)\d{4}" + _R),
    # Chinese mobile: 13800138000, 138 0013 8000, 138-0013-8000, +86 138...
    re.compile(r"(?<![0-9A-Za-z+])(?:\+?86[ \-]?)?1[3-9]\d([ \-]?)\d{4}\1\d{4}" + _R),
]
# After a phone keyword, looser forms count too: 2345 6789, 912 345 678, 8 (495) 123-45-67
_PHONE_LOOSE = re.compile(
    _L + r"(?:\+?\d{1,14}|\(\d{1,5}\))(?:(?:" + _SEP + r"|[ ]?\(\d{1,5}\)[ ]?)\d{1,10}){0,6}" + _R
)
# A date (with a four-digit year) or a year range is not a phone, even after "call".
_DATE_START = re.compile(
    r"\d{1,2}([./\-])\d{1,2}\1(?:19|20)\d\d|(?:19|20)\d\d([./\-])\d{1,2}\2\d{1,2}|(?:19|20)\d\d\s?[\-/]\s?(?:19|20)?\d\d\b"
)
_IPV4 = re.compile(r"(?<![0-9A-Za-z.])(?:\d{1,3}\.){3}\d{1,3}(?![0-9A-Za-z])(?!\.\d)")
_IPV6 = re.compile(r"(?<![0-9A-Za-z:.])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![0-9A-Za-z:])")
_CARD = re.compile(
    _L + r"(?:[2-6]\d{12,18}|[2-6]\d{3}([ \-])\d{4}(?:\1\d{4}){1,2}(?:\1\d{1,4})?|3[47]\d{2}([ \-])\d{6}\2\d{5})" + _R
)
_IBAN = re.compile(r"[A-Z](?<![0-9A-Za-z][A-Z])[A-Z]\d{2}(?:[ ]?[A-Z0-9]{4}){2,7}(?:[ ]?[A-Z0-9]{1,3})?(?![0-9A-Za-z])")
_SSN = re.compile(_L + r"(\d{3})([\- ]?)(\d{2})\2(\d{4})" + _R)
_CN_ID = re.compile(
    r"(?<![0-9A-Za-z])[1-9]\d{5}(?:18|19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\d{3}[\dXx](?![0-9A-Za-z])"
)

# A number right before one of these is an amount, not a phone or card number.
_AMOUNT_AFTER = re.compile(
    r"\s?(?:元|块|円|万|亿|億|%|％|€|\$|¥|dollars?\b|euros?\b|usd\b|eur\b|rmb\b|yuan\b)", re.IGNORECASE
)
# Context: the words right before a number (after its last digit or line break) say what it is.
_PHONE_WORDS = {"tel", "tél", "phone", "ph", "fax", "mobile", "mob", "cell", "call", "whatsapp", "handy", "tlf",
                "contact", "ring", "bel", "móvil", "movil", "celular", "cellulare", "portable", "mobiel", "mobil",
                "llame", "llámanos", "appelez", "zadzwoń", "ligue", "тел", "звоните"}  # fmt: skip
_PHONE_STEMS = ("telef", "teleph", "téléph", "teléf", "телеф")
_PHONE_CJK = ("电话", "電話", "手机", "手機", "携帯", "联系", "連絡", "전화", "연락처")
_VERSION_WORDS = {"version", "ver", "v", "build", "release", "rev", "revision", "firmware", "update", "patch",
                  "chrome", "firefox", "safari", "android", "ios", "windows",
                  "versión", "versione", "versão", "版本"}  # fmt: skip
# A number right after one of these labels is an identifier of a thing, not of a person.
_THING_WORDS = {"order", "invoice", "tracking", "shipment", "isbn", "issn", "ean", "upc", "gtin", "sku", "serial",
                "riferimento", "lot", "transaction", "txn", "part", "model", "item", "ticket", "case", "patent",
                "doi", "pmid", "arxiv", "commande", "facture", "pedido", "factura"}  # fmt: skip
_THING_STEMS = ("ref", "bestell", "rechnung", "auftrag", "artikel", "заказ")
_THING_CJK = ("订单", "單號", "单号", "编号", "編號", "流水号", "货号", "运单", "快递单", "發票", "发票", "注文番号")
_FILLERS = {
    "no",
    "nr",
    "number",
    "num",
    "id",
    "code",
    "n",
    "is",
    "was",
    "ist",
    "est",
    "es",
    "è",
    "é",
    "de",
    "号",
    "號",
    "番号",
}
_WORD = re.compile(r"[^\W\d_]+")
_NO_DIGIT_RUN = re.compile(r"[^\d\n]*")


def _words_before(text: str, start: int, width: int = 30) -> list[str]:
    """Lower-cased words between the previous digit (or line break) and ``start``."""
    reversed_window = text[max(0, start - width) : start][::-1]
    return _WORD.findall(_NO_DIGIT_RUN.match(reversed_window).group()[::-1].lower())


def _is_phone_context(words: list[str]) -> bool:
    return any(w in _PHONE_WORDS or w.startswith(_PHONE_STEMS) or any(k in w for k in _PHONE_CJK) for w in words[-3:])


def _is_thing_label(words: list[str]) -> bool:
    while words and words[-1] in _FILLERS:
        words = words[:-1]
    if not words:
        return False
    w = words[-1]
    return w in _THING_WORDS or w.startswith(_THING_STEMS) or w.endswith(_THING_CJK)


# ---------------------------------------------------------------------------------------------
# Detection


def _labelled_not_pii(text: str, start: int, end: int) -> bool:
    """The number is labelled as an order/product/document number, or is an amount of money."""
    return _is_thing_label(_words_before(text, start, 40)) or _AMOUNT_AFTER.match(text, end) is not None


def _pairs_not_phone(candidate: str) -> bool:
    """Digit pairs form a phone only as the five pairs of 01 23 45 67 89; six pairs are lottery numbers."""
    groups = re.split(r"[ .\-/]", candidate)
    return all(len(g) == 2 for g in groups) and len(groups) != 5


def _count_digits(s: str) -> int:
    return sum(map(str.isdigit, s))


# Numeric detectors run only inside these chunks (digits, separators, brackets, a trailing X): one
# cheap scan finds them, so ordinary prose costs one pass instead of one per detector.
_NUMERIC_CHUNK = re.compile(r"[+(（]?\d[\d .\-/()（）+Xx]*")
_LOCAL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._%+-")


def _numeric_spans(text: str, pos: int, endpos: int, types, digits: int, dots: int) -> list[Span]:
    """Candidates inside one numeric chunk; detectors that need more digits than it has are skipped."""
    spans = []
    if "cn_id" in types and digits >= 17:
        for m in _CN_ID.finditer(text, pos, endpos):
            if cn_id_ok(m.group()) and not _labelled_not_pii(text, m.start(), m.end()):
                spans.append(Span(m.start(), m.end(), "cn_id"))
    if "credit_card" in types and digits >= 13:
        for m in _CARD.finditer(text, pos, endpos):
            if card_ok(re.sub(r"[ \-]", "", m.group())) and not _labelled_not_pii(text, m.start(), m.end()):
                spans.append(Span(m.start(), m.end(), "credit_card"))
    if "ssn" in types and digits >= 9:
        for m in _SSN.finditer(text, pos, endpos):
            words = _words_before(text, m.start())
            formatted = m.group(2) == "-" or "ssn" in words[-3:] or "security" in words[-3:]
            if (
                formatted
                and ssn_ok(m.group(1), m.group(3), m.group(4))
                and not _labelled_not_pii(text, m.start(), m.end())
            ):
                spans.append(Span(m.start(), m.end(), "ssn"))
    if "ip" in types and dots >= 3:
        for m in _IPV4.finditer(text, pos, endpos):
            if ip_ok(m.group()) and not _VERSION_WORDS.intersection(_words_before(text, m.start(), 20)[-1:]):
                spans.append(Span(m.start(), m.end(), "ip"))
    if "phone" in types and digits >= 7:
        for pattern in _PHONE_PATTERNS:
            for m in pattern.finditer(text, pos, endpos):
                candidate, digits = m.group(), _count_digits(m.group())
                if 8 <= digits <= 15 and (candidate[0] in "+(（" or digits >= 9) and not _pairs_not_phone(candidate):
                    if not _DATE_START.match(candidate) and not _labelled_not_pii(text, m.start(), m.end()):
                        spans.append(Span(m.start(), m.end(), "phone"))
        if _is_phone_context(_words_before(text, pos)):  # "Tel: 2345 6789": looser forms after a keyword
            for m in _PHONE_LOOSE.finditer(text, pos, endpos):
                if 7 <= _count_digits(m.group()) <= 15 and not _DATE_START.match(m.group()):
                    spans.append(Span(m.start(), m.end(), "phone"))
    return spans


def find_pii(text: str, types: list[str] | tuple[str, ...] = tuple(ALL_TYPES)) -> list[Span]:
    """Non-overlapping PII spans in ``text``, sorted by start."""
    if not text:
        return []
    spans: list[Span] = []
    if "email" in types:
        at = text.find("@")
        while at >= 0:
            start = at
            while start > 0 and at - start < 64 and text[start - 1] in _LOCAL_CHARS:
                start -= 1
            m = _EMAIL.match(text, start, at + 256)
            if m and m.group(1).lower() not in _FILE_TLDS:
                spans.append(Span(m.start(), m.end(), "email"))
            at = text.find("@", m.end() if m else at + 1)
    if "iban" in types:
        for m in _IBAN.finditer(text):
            end = iban_end(m.group())
            if end:
                spans.append(Span(m.start(), m.start() + end, "iban"))
    if "ip" in types and text.count(":") >= 2:
        spans += [Span(m.start(), m.end(), "ip") for m in _IPV6.finditer(text) if ip_ok(m.group())]
    for chunk in _NUMERIC_CHUNK.finditer(text):
        digits, dots = _count_digits(chunk.group()), chunk.group().count(".")
        if digits >= 7 or (digits >= 4 and dots >= 3):
            spans += _numeric_spans(text, chunk.start(), min(len(text), chunk.end() + 2), types, digits, dots)
    return _resolve(spans)


def _resolve(spans: list[Span]) -> list[Span]:
    """Non-overlapping spans: within each group of overlapping candidates, higher-priority types win,
    then longer spans."""
    rank = {t: i for i, t in enumerate(PRIORITY)}
    chosen: list[Span] = []
    group: list[Span] = []
    group_end = -1
    for span in sorted(spans) + [Span(1 << 62, 1 << 62, "email")]:  # sentinel flushes the last group
        if group and span.start >= group_end:
            picked: list[Span] = []
            for s in sorted(group, key=lambda s: (rank[s.type], s.start - s.end, s.start)):
                if all(s.end <= c.start or s.start >= c.end for c in picked):
                    picked.append(s)
            chosen += sorted(picked)
            group = []
        group.append(span)
        group_end = max(group_end, span.end) if len(group) > 1 else span.end
    return chosen


def redact(text: str, spans: list[Span], placeholders: dict[str, str] = PLACEHOLDERS) -> str:
    parts, pos = [], 0
    for span in spans:
        parts.append(text[pos : span.start])
        parts.append(placeholders[span.type])
        pos = span.end
    parts.append(text[pos:])
    return "".join(parts)


# ---------------------------------------------------------------------------------------------
# The stage


@register("pii")
class PiiScrubber(DocumentStage):
    """Replace PII with typed placeholders and count it per type; optionally drop PII-heavy pages."""

    types: list[PiiType] = Field(default_factory=lambda: list(ALL_TYPES), description="detectors to run")
    redact: bool = True  # false: only count (audit runs)
    max_spans: int | None = Field(None, ge=0, description="drop documents with more PII spans than this (Dolma: 5)")

    def _columns(self) -> list[str]:
        return [f"pii_{t}" for t in ALL_TYPES] + ["pii_count"]

    def output_fields(self) -> list[pa.Field]:
        return [pa.field(c, pa.int32()) for c in self._columns()]

    def process(self, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
        texts = batch.column("text").to_pylist()
        counts = {t: [0] * len(texts) for t in ALL_TYPES}
        new_texts, reasons, totals = [], [], []
        for i, text in enumerate(texts):
            spans = find_pii(text or "", self.types)
            for span in spans:
                counts[span.type][i] += 1
                self.count(f"{'redacted' if self.redact else 'found'}:{span.type}")
            totals.append(len(spans))
            new_texts.append(redact(text, spans) if spans and self.redact else text)
            too_many = self.max_spans is not None and len(spans) > self.max_spans
            reasons.append("pii:too_many_spans" if too_many else None)
        batch = with_column(batch, "text", new_texts, pa.string())
        for t in ALL_TYPES:
            batch = with_column(batch, f"pii_{t}", counts[t], pa.int32())
        return with_column(batch, "pii_count", totals, pa.int32()), reasons
