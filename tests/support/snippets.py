"""Extraction quality on pages annotated like trafilatura's evaluation set (``with`` snippets are main
text, ``without`` snippets boilerplate). Used by the extraction tests and the extraction benchmarks (run from the
repository root, they import ``tests.support.snippets``)."""

from __future__ import annotations


def snippet_scores(texts: list[str], gold: list[dict]) -> dict[str, float]:
    """The share of ``with`` snippets found and of ``without`` snippets absent, whitespace-normalised."""
    found = total_with = absent = total_without = 0
    for text, page in zip(texts, gold):
        flat = " ".join((text or "").split())
        found += sum(" ".join(s.split()) in flat for s in page["with"])
        absent += sum(" ".join(s.split()) not in flat for s in page["without"])
        total_with += len(page["with"])
        total_without += len(page["without"])
    return {"with_found": found / max(total_with, 1), "without_absent": absent / max(total_without, 1)}
