"""Decontamination: documents that share an n-gram with an evaluation text are removed or flagged.

Evaluation sets are JSONL or Parquet files of texts (``text_fields`` of each row; a field may hold a
list of texts, e.g. answer choices). Texts are FineWeb-normalized and cut into the same hashed
shingles as MinHash dedup (``normalize.shingle_hashes``): ``ngram`` words, or ``char_ngram``
characters for Chinese, Japanese, Thai and other scripts written without spaces. An evaluation text
shorter than one n-gram is skipped: it would match any document that merely contains its words.

This is a document stage, so it runs fused with the other per-document stages in one pass. Every
Python worker reads the evaluation files once (they must be readable where the tasks run, like the
input) and keeps their n-grams as one sorted array, the equivalent of a broadcast. Columns added:
``contaminated_by`` (the evaluation item matched, ``<file stem>:<id>``, the smallest when several;
null when clean) and ``contamination_ngrams`` (n-grams in common).
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Literal, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field

from dataprep.core.errors import UsageError
from dataprep.core.inputs import expand_inputs, read_jsonl_records
from dataprep.core.registry import register
from dataprep.core.stage import DocumentStage, with_column
from dataprep.core.storage import open_stream
from dataprep.dedup.normalize import is_unspaced, normalize, shingle_hashes

REASON = "contaminated"
MATCHED_BY = "contaminated_by"
MATCHES = "contamination_ngrams"


class EvalNgrams(NamedTuple):
    hashes: np.ndarray  # sorted distinct uint64 n-gram hashes
    owners: np.ndarray  # int64: index into ids of the smallest item holding each hash
    ids: list[str]  # sorted evaluation item ids


def _stem(path: str) -> str:
    name = os.path.basename(path.rstrip("/"))
    return name.split(".")[0] or name


def eval_items(paths: list[str], text_fields: list[str], id_field: str | None) -> list[tuple[str, str]]:
    """(item id, text) for every text of every row of the evaluation files (JSONL, optionally
    compressed, or Parquet); a row without ``id_field`` is named by its row number."""
    items = []
    for path in expand_inputs(paths, skip_links_out=True):
        stem = _stem(path)
        if ".parquet" in os.path.basename(path):
            with open_stream(path, decompress=False) as fh:
                rows = pq.read_table(fh).to_pylist()
        else:
            rows = [record or {} for record, _, _ in read_jsonl_records([path])]
        for n, row in enumerate(rows):
            item = f"{stem}:{row.get(id_field, n) if id_field else n}"
            for field in text_fields:
                value = row.get(field)
                for text in value if isinstance(value, list) else [value]:
                    if isinstance(text, str) and text.strip():
                        items.append((item, text))
    return items


@lru_cache(maxsize=4)
def load_eval_ngrams(
    paths: tuple[str, ...], text_fields: tuple[str, ...], id_field: str | None, ngram: int, char_ngram: int
) -> EvalNgrams:
    """The n-gram index of the evaluation sets, built once per process."""
    items = eval_items(list(paths), list(text_fields), id_field)

    def long_enough(text: str) -> bool:
        normalized = normalize(text)
        return (
            len(normalized.replace(" ", "")) >= char_ngram
            if is_unspaced(normalized)
            else len(normalized.split()) >= ngram
        )

    items = [(i, t) for i, t in items if long_enough(t)]
    if not items:
        raise UsageError(f"decontaminate: no evaluation text of at least one n-gram in {list(paths)}")
    ids = sorted({i for i, _ in items})
    rank = {i: r for r, i in enumerate(ids)}
    hashes, offsets = shingle_hashes([t for _, t in items], ngram, char_ngram)
    owners = np.repeat(np.array([rank[i] for i, _ in items], dtype=np.int64), np.diff(offsets))
    order = np.lexsort((owners, hashes))  # by hash, then smallest owner first
    hashes, owners = hashes[order], owners[order]
    first = np.ones(len(hashes), dtype=bool)
    first[1:] = hashes[1:] != hashes[:-1]
    return EvalNgrams(hashes[first], owners[first], ids)


@register("decontaminate")
class Decontaminate(DocumentStage):
    """Remove (or flag) documents sharing an n-gram (13 words; characters for CJK) with an evaluation text."""

    eval_sets: list[str] = Field(
        ..., min_length=1, description="JSONL or Parquet files (globs, URLs) of evaluation texts"
    )
    text_fields: list[str] = Field(
        ["text"], min_length=1, description="fields holding evaluation text (a string or a list of strings)"
    )
    id_field: str | None = Field("id", description="field naming an evaluation item (else its row number)")
    ngram: int = Field(13, ge=1, description="words per n-gram")
    char_ngram: int = Field(13, ge=1, description="characters per n-gram in scripts written without spaces")
    min_matches: int = Field(1, ge=1, description="n-grams in common that make a document contaminated")
    action: Literal["remove", "flag"] = "remove"

    def output_fields(self) -> list[pa.Field]:
        return [pa.field(MATCHED_BY, pa.string()), pa.field(MATCHES, pa.int32())]

    def eval_ngrams(self) -> EvalNgrams:
        return load_eval_ngrams(
            tuple(self.eval_sets), tuple(self.text_fields), self.id_field, self.ngram, self.char_ngram
        )

    def matches(self, texts: list[str | None]) -> tuple[list[str | None], np.ndarray]:
        """Per text: the smallest evaluation item it shares an n-gram with (or None), and how many
        of its n-grams (with repeats) are evaluation n-grams."""
        index = self.eval_ngrams()
        hashes, offsets = shingle_hashes(texts, self.ngram, self.char_ngram)
        at = np.minimum(np.searchsorted(index.hashes, hashes), len(index.hashes) - 1)
        hit = index.hashes[at] == hashes
        doc = np.repeat(np.arange(len(texts)), np.diff(offsets))[hit]
        count = np.bincount(doc, minlength=len(texts))
        best = np.full(len(texts), len(index.ids), dtype=np.int64)
        np.minimum.at(best, doc, index.owners[at[hit]])
        found = [index.ids[b] if c >= self.min_matches else None for b, c in zip(best.tolist(), count.tolist())]
        return found, count.astype(np.int32)

    def process(self, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
        found, count = self.matches(batch.column("text").to_pylist())
        contaminated = sum(f is not None for f in found)
        if contaminated:
            self.count("contaminated_documents", contaminated)
        batch = with_column(batch, MATCHED_BY, found, pa.string())
        batch = with_column(batch, MATCHES, pa.array(count, pa.int32()))
        if self.action == "flag":
            return batch, [None] * batch.num_rows
        return batch, [None if f is None else REASON for f in found]
