"""Real text with planted near-duplicates: the documents in ../shared/data, blocks of sentences per language,
and a mutation by random token edits. Shared by the dedup tests and bench/dedup (run from the repository root,
the bench imports ``tests.support.near_duplicates``)."""

from __future__ import annotations

import gzip
import json
import random
from collections import defaultdict
from pathlib import Path

from dataprep.dedup.normalize import is_unspaced, normalize


def real_documents(data: Path) -> list[str]:
    """The texts of the real web documents under documents/ (about 50, English)."""
    docs = []
    for path in sorted((data / "documents").iterdir()):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as fh:
            docs.extend(json.loads(line)["text"] for line in fh if line.strip())
    return docs


def base_documents(data: Path) -> list[str]:
    """The real documents, then blocks of 60 sentences of each language in langid/ (75 languages, CJK included)."""
    docs = real_documents(data)
    by_lang = defaultdict(list)
    with open(data / "langid" / "lingua-sentences-75langs-300each.jsonl", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            by_lang[row["lang"]].append(row["text"])
    for lang, sentences in sorted(by_lang.items()):
        for start in range(0, len(sentences) - 59, 60):
            docs.append(" ".join(sentences[start : start + 60]))
    return docs


def mutate(text: str, rate: float, rng: random.Random, vocab: list[str]) -> str:
    """Substitute, delete or insert tokens (words, or characters for unspaced scripts) at ``rate``."""
    unspaced = is_unspaced(normalize(text))
    tokens = list(text) if unspaced else text.split()
    out = []
    for tok in tokens:
        r = rng.random()
        if r < rate / 3:
            out.append(rng.choice(vocab if not unspaced else tokens))
        elif r < 2 * rate / 3:
            continue
        elif r < rate:
            out.extend([tok, rng.choice(vocab if not unspaced else tokens)])
        else:
            out.append(tok)
    return ("" if unspaced else " ").join(out)
