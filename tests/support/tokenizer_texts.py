"""Real multilingual text for tokenizer tests (lingua sentences and web documents from ../shared) and the
edge cases a tokenizer must round-trip exactly."""

from __future__ import annotations

import gzip
import json

import pyarrow as pa

from dataprep.core.stage import DOC_SCHEMA

EDGE_CASES = [
    "  two leading spaces, trailing tab\t",
    "line one\r\nline two\n\n\nthree blank lines   and  double  spaces",
    "digits 1234567890 and 3.14159, emoji 😀🧪, math ∮ E⋅da = Q, hieroglyph 𓀀",
    "ﬁ ligature and Ｆｕｌｌｗｉｄｔｈ stay as written (no NFKC)",
    "\x00 nul and \x7f delete control characters",
    " ",
]


def load_texts(shared_data):
    lingua = [
        json.loads(line)
        for line in open(shared_data / "langid" / "lingua-sentences-75langs-300each.jsonl", encoding="utf-8")
    ]
    docs = []
    for name in ("dolma-cc_en_head-0091.jsonl.gz", "dolma-cc-2023-06-documents-000.json.gz"):
        with gzip.open(shared_data / "documents" / name, "rt", encoding="utf-8") as fh:
            docs += [json.loads(line)["text"] for line in fh]
    with open(shared_data / "documents" / "redpajama-cc-2023-06-refined.jsonl", encoding="utf-8") as fh:
        docs += [json.loads(line)["text"] for line in fh]
    return lingua, docs


def texts_table(texts):
    n = len(texts)
    return pa.table(
        {"id": [f"d{i}" for i in range(n)], "url": [""] * n, "date": [""] * n, "source": ["test"] * n, "text": texts},
        schema=DOC_SCHEMA,
    )
