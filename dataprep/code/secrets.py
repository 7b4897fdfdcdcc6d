"""Secrets redaction for source files: cloud keys, tokens, private keys and passwords in assignments
are replaced with typed placeholders (``<SECRET_AWS_KEY>``) and counted per type, like the PII stage.

Each detector is a regex anchored on the secret's own format (``AKIA`` + 16, ``ghp_`` + 36, a PEM
block) or on a label (``aws_secret_access_key =``, ``password:``, ``user:pass@`` in a URL). A candidate
value that reads as an example stays: documentation keys (``AKIAIOSFODNN7EXAMPLE``), placeholders
(``your-api-key-here``, ``xxxx``, ``<token>``, ``${ENV}``, ``{{ var }}``), variable references and
too-short values. Hashes and UUIDs match no detector, so they stay.

Attributes: one int32 column per type, ``secrets_<type>``, plus ``secrets_count``; stats count
``redacted:<type>`` (``found:<type>`` with ``redact: false``), which the report and the run's table show.
"""

from __future__ import annotations

import re

import pyarrow as pa
from pydantic import Field

from dataprep.core.errors import UsageError
from dataprep.core.registry import register
from dataprep.core.stage import DocumentStage, with_column
from dataprep.safety.pii import Span, redact

_B = r"(?<![A-Za-z0-9_\-])"  # a token starts after a non-token character
_E = r"(?![A-Za-z0-9_\-])"
# type -> pattern; the value to redact is group "v" when the pattern has one, else the whole match.
DETECTORS: dict[str, re.Pattern] = {
    "private_key": re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\S]{16,20000}?-----END (?:[A-Z0-9]+ "
        r")*PRIVATE KEY(?: BLOCK)?-----"
    ),
    "aws_key": re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}(?![A-Z0-9])"),
    "aws_secret": re.compile(
        r"(?i:aws)[\w.\-]{0,30}(?i:secret)[\w.\-]{0,30}[\"']?\s*[:=]>?\s*[\"']?(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
    ),
    "azure_key": re.compile(
        r"(?i:AccountKey|SharedAccessKey|azure[\w.\-]{0,20}key)[\"']?\s*[:=]\s*[\"']?(?P<v>[A-Za-z0-9+/]{40,100}={0,2})"
    ),
    "github_token": re.compile(_B + r"(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})" + _E),
    "slack_token": re.compile(
        _B + r"(?:xox[abposr]-[A-Za-z0-9\-]{10,200}|https://hooks\.slack\.com/services/T[A-Za-z0-9_/]{20,120})"
    ),
    "stripe_key": re.compile(_B + r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,200}" + _E),
    "openai_key": re.compile(_B + r"sk-(?:proj-|svcacct-|ant-api03-)?[A-Za-z0-9_\-]{20,200}" + _E),
    "jwt": re.compile(_B + r"eyJ[A-Za-z0-9_\-]{10,2000}\.eyJ[A-Za-z0-9_\-]{10,4000}\.[A-Za-z0-9_\-]{10,1000}" + _E),
    # password = "...", PASSWORD: ..., "api_key": "...", DB_PASS=...
    "password": re.compile(
        r"(?i:password|passwd|pwd|passphrase|secret|api_?key|access_?token|auth_?token|db_pass)[\w.\-]{0,40}[\"']?"
        r"[ \t]*(?::=|=>|=|:)[ \t]*(?:(?P<q>[\"'])(?P<v>[^\"'\n]{1,200})(?P=q)|(?P<u>[^\s\"',;#)]{1,200}))"
    ),
    # scheme://user:password@host
    "connection_string": re.compile(r"[a-z][a-z0-9+.\-]{1,20}://[^\s:/@\"']{1,64}:(?P<v>[^\s@/\"']{1,128})@[\w.\-]+"),
}
TYPES = list(DETECTORS)
PLACEHOLDERS = {t: f"<SECRET_{t.upper()}>" for t in TYPES}
PLACEHOLDERS["connection_string"] = PLACEHOLDERS["password"] = "<SECRET_PASSWORD>"

# A value that says it is an example, a placeholder or a reference to something else.
_EXAMPLE = re.compile(
    r"example|sample|dummy|placeholder|your[_\-\s]|yourkey|here\b|changeme|fake|test_?key|redacted|secret_?key_?here|"
    r"x{4,}|\*{3,}|\.{3}|<[^>]*>|\$\{|\{\{|\{[^}]*\}|%\(|%s|^\$\w+$|^env\b|os\.environ|getenv|process\.env|none|null|true|false|"
    r"^(?:pass(?:word)?|secret|token|pwd)$",
    re.I,
)
# An unquoted value that reads as code (a name, an attribute, a call, a subscript or type) is a reference,
# not a password.
_REFERENCE = re.compile(r"^[A-Za-z_][\w.]*([(\[].*)?$")


def is_example(value: str, quoted: bool = True) -> bool:
    """Whether a candidate secret reads as an example or placeholder rather than a real value."""
    if _EXAMPLE.search(value) or len(set(value)) <= 2:
        return True
    return not quoted and _REFERENCE.match(value) is not None and not any(c.isdigit() for c in value)


def find_secrets(text: str, types: list[str] | tuple[str, ...] = tuple(TYPES)) -> list[Span]:
    """Non-overlapping secret spans (the value only, not its label), sorted by start."""
    spans: list[Span] = []
    for kind in types:
        for m in DETECTORS[kind].finditer(text):
            group = (
                "v"
                if m.re.groupindex.get("v") and m.group("v") is not None
                else ("u" if m.re.groupindex.get("u") else 0)
            )
            value = m.group(group)
            if kind in ("password", "connection_string"):
                if len(value) < 6 or is_example(value, quoted=group != "u"):
                    continue
            elif is_example(value):
                continue
            spans.append(Span(m.start(group), m.end(group), kind))
    chosen: list[Span] = []
    for span in sorted(spans, key=lambda s: (TYPES.index(s.type), s.start)):  # specific detectors before generic ones
        if all(span.end <= c.start or span.start >= c.end for c in chosen):
            chosen.append(span)
    return sorted(chosen)


@register("code_secrets")
class CodeSecrets(DocumentStage):
    """Replace secrets with typed placeholders and count them per type; optionally only count."""

    types: list[str] = Field(default_factory=lambda: list(TYPES), description=f"detectors to run: {', '.join(TYPES)}")
    redact: bool = True

    def model_post_init(self, _context) -> None:
        unknown = sorted(set(self.types) - set(TYPES))
        if unknown:
            raise UsageError(f"code_secrets: unknown types {unknown}; known: {', '.join(TYPES)}")

    def output_fields(self) -> list[pa.Field]:
        return [pa.field(f"secrets_{t}", pa.int32()) for t in TYPES] + [pa.field("secrets_count", pa.int32())]

    def process(self, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
        texts = batch.column("text").to_pylist()
        counts = {t: [0] * len(texts) for t in TYPES}
        new_texts, totals = [], []
        for i, text in enumerate(texts):
            spans = find_secrets(text or "", self.types)
            for span in spans:
                counts[span.type][i] += 1
                self.count(f"{'redacted' if self.redact else 'found'}:{span.type}")
            totals.append(len(spans))
            new_texts.append(redact(text, spans, PLACEHOLDERS) if spans and self.redact else text)
        batch = with_column(batch, "text", new_texts, pa.string())
        for t in TYPES:
            batch = with_column(batch, f"secrets_{t}", counts[t], pa.int32())
        return with_column(batch, "secrets_count", totals, pa.int32()), [None] * len(texts)
