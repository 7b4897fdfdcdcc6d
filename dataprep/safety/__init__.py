"""Safety scrubbing stages: URL blocklists (``url_filter``), toxicity scores (``toxicity``) and PII
redaction (``pii``). Helpers shared by them live here: shipped asset paths, list files and literal
matchers.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

ASSETS = Path(__file__).resolve().parent.parent / "assets" / "safety"


def read_list(path: str | Path) -> list[str]:
    """Entries of a list file: one per line, stripped; blank lines and ``#`` comments skipped.
    Undecodable bytes are replaced, so one bad line in a third-party list never stops a job."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        return [line.strip() for line in fh if line.strip() and not line.lstrip().startswith("#")]


def literal_union(words: Iterable[str]) -> str:
    """A regex source matching any of ``words`` (longest first), shaped as a trie so that matching
    costs one walk down the trie per text position (like Aho-Corasick) instead of one try per word."""
    trie: dict = {}
    for word in words:
        if not word:
            continue
        node = trie
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict) -> str:
        alternatives = [re.escape(ch) + build(child) for ch, child in sorted(node.items()) if ch]
        if not alternatives:
            return ""
        body = alternatives[0] if len(alternatives) == 1 else "(?:" + "|".join(alternatives) + ")"
        return f"(?:{body})?" if "" in node else body

    return build(trie)
