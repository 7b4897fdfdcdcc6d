"""Real text for the dedup tests: the documents in ../shared/data (near_duplicates.py), trafilatura-eval's main
text and boilerplate snippets, and a table builder in the pipeline's document schema."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa

from dataprep.core.stage import DOC_SCHEMA
from near_duplicates import real_documents  # noqa: F401 - the real documents, for the dedup tests


def eval_pages(shared_data: Path) -> list[dict]:
    """trafilatura-eval's 200 pages: url, ``with`` (main-text snippets), ``without`` (boilerplate)."""
    with open(shared_data / "html" / "trafilatura-eval" / "gold.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def doc_table(
    docs: dict[str, str | None], urls: dict[str, str] | None = None, dates: dict[str, str] | None = None
) -> pa.Table:
    """Documents (id -> text) as a table with the pipeline's columns."""
    ids = list(docs)
    n = len(ids)
    url = [(urls or {}).get(i, f"https://x/{i}") for i in ids]
    date = [(dates or {}).get(i, "") for i in ids]
    return pa.table(
        {"id": ids, "url": url, "date": date, "source": ["t"] * n, "text": list(docs.values())}, schema=DOC_SCHEMA
    )
