"""Line, paragraph and sentence-span dedup: pieces of text repeated across documents (site templates,
cookie banners, navigation that survived extraction) are cut out of the documents that repeat them.

Each document is split into segments (lines, blank-line separated paragraphs, or sentences); every
segment, or every window of ``span`` consecutive segments (datatrove's 3-sentence spans), is
normalized and hashed to a 64-bit key. A key found in more than ``max_documents`` documents is
duplicated: its segments are removed from every document (``keep: none``) or from all but the
document with the smallest id (``keep: first``). A document that lost something and keeps fewer than
``min_remaining_chars`` characters is dropped as ``duplicate_paragraphs``; documents that lose nothing
are left byte for byte as they were.

A document counts a key once however often it repeats it (repetition inside one document is
``gopher_repetition``'s business). 64-bit keys: among 10^10 distinct paragraphs, the chance that a
unique one collides with one of 10^8 duplicated ones is about 5%, and the cost is one wrongly cut
paragraph. One definition, run by both runners (``dataprep.core.stage.GlobalStage``): ``prepare`` hashes
the windows, ``decide`` finds the keys to cut (on Spark, ``pipelines.paragraph_dedup``: keys shuffled by
hash, never gathered on the driver), ``CutParagraphs`` cuts them.
"""

from __future__ import annotations

import re
from typing import ClassVar, Literal

import pyarrow as pa
import pyarrow.compute as pc
import xxhash
from pydantic import Field

from dataprep.core.applier import Applier
from dataprep.core.errors import UsageError
from dataprep.core.registry import register
from dataprep.core.stage import GlobalStage, with_column
from dataprep.dedup.normalize import Normalization, normalize_many

REASON = "duplicate_paragraphs"
CUTS = "_cuts"  # decision rows: the keys to cut from a document
# A document's window keys, one row per distinct key: what ``prepare`` gives (Spark's prepare tasks save them)
KEY_SCHEMA = pa.schema([("id", pa.string()), ("key", pa.int64())])
# Separators kept between segments (a capturing group, so re.split returns them too).
_SEPARATORS = {
    "line": re.compile(r"(\r?\n)"),
    "paragraph": re.compile(r"(\r?\n(?:[ \t]*\r?\n)+)"),
    # after . ! ? … followed by space, after CJK full stops, or at a line break
    "sentence": re.compile(r"((?<=[.!?…])\s+|(?<=[。！？])\s*|\s*\n\s*)"),
}


def split_segments(text: str, unit: str) -> tuple[list[str], list[str]]:
    """(segments, separators): ``segments[i] + separators[i] + segments[i + 1] ...`` is ``text``."""
    pieces = _SEPARATORS[unit].split(text)
    return pieces[0::2], pieces[1::2]


def _key(text: str) -> int:
    return xxhash.xxh3_64_intdigest(text.encode("utf-8", "surrogatepass")) - (1 << 63)  # signed: Spark bigint


@register("paragraph_dedup")
class ParagraphDedup(GlobalStage):
    """Remove lines, paragraphs or sentence spans that recur in more than ``max_documents`` documents
    (from all of them, or from all but the smallest id); drop documents left too short."""

    unit: Literal["line", "paragraph", "sentence"] = Field(
        "line", description="what a segment is: a line, a blank-line separated paragraph, or a sentence"
    )
    span: int = Field(
        1,
        ge=1,
        description="segments per hashed window (datatrove: 3 sentences); a duplicated window removes all its segments",
    )
    normalization: Normalization = "fineweb"
    max_documents: int = Field(1, ge=1, description="a segment found in more documents than this is duplicated")
    keep: Literal["first", "none"] = Field(
        "first", description="first: the smallest id keeps its copy; none: removed everywhere (boilerplate)"
    )
    min_chars: int = Field(0, ge=0, description="normalized windows shorter than this are never removed")
    min_remaining_chars: int = Field(
        100, ge=0, description="a document that lost segments is dropped below this many characters"
    )

    def windows(self, texts: list[str | None]) -> list[list[tuple[int, list[int]]]]:
        """Per text, its hashed windows as (key, indices of the segments they cover). Segments that
        normalize to nothing (blank lines, lone punctuation) are skipped and never removed."""
        split = [split_segments(t or "", self.unit)[0] for t in texts]
        flat = normalize_many([s for segments in split for s in segments], self.normalization)
        out, at = [], 0
        for segments in split:
            normalized = flat[at : at + len(segments)]
            at += len(segments)
            solid = [i for i, s in enumerate(normalized) if s]
            found = []
            for j in range(len(solid) - self.span + 1):
                covered = solid[j : j + self.span]
                joined = "\n".join(normalized[i] for i in covered)
                if len(joined) >= self.min_chars:
                    found.append((_key(joined), covered))
            out.append(found)
        return out

    def key_batch(self, ids: list[str], texts: list[str | None]) -> pa.RecordBatch:
        """(id, key) for each distinct key of each document: what Spark shuffles."""
        owners, keys = [], []
        for doc_id, found in zip(ids, self.windows(texts)):
            distinct = {k for k, _ in found}
            owners.extend([doc_id] * len(distinct))
            keys.extend(distinct)
        return pa.RecordBatch.from_arrays(
            [pa.array(owners, pa.string()), pa.array(keys, pa.int64())], names=["id", "key"]
        )

    def remove(
        self, texts: list[str | None], removals: list[list[int] | None]
    ) -> tuple[list[str | None], list[str | None]]:
        """(texts, drop reasons) after cutting, from each text, the segments of its windows whose key is
        in its removal list (None: nothing to cut, the text stays as it is)."""
        todo = [i for i, r in enumerate(removals) if r]
        new_texts, reasons = list(texts), [None] * len(texts)
        for i, found in zip(todo, self.windows([texts[i] for i in todo])):
            doomed = set(removals[i])
            cut = {s for key, covered in found if key in doomed for s in covered}
            if not cut:
                continue
            segments, separators = split_segments(texts[i], self.unit)
            kept = [s for s in range(len(segments)) if s not in cut]
            text = "".join(segments[s] + (separators[s] if s != kept[-1] else "") for s in kept) if kept else ""
            new_texts[i] = text
            if len(text.strip()) < max(1, self.min_remaining_chars):
                reasons[i] = REASON
        return new_texts, reasons

    prepared_schema: ClassVar[pa.Schema] = KEY_SCHEMA

    def prepare(self, documents: pa.Table) -> pa.Table:
        """(id, key) for each distinct window key of each document."""
        return pa.Table.from_batches(
            [self.key_batch(documents.column("id").to_pylist(), documents.column("text").to_pylist())]
        )

    def decide(self, prepared: pa.Table, documents: pa.Table) -> tuple[pa.Table, dict]:
        """Decision rows (id, CUTS) of the documents that lose segments: the keys held by more than
        ``max_documents`` documents, except in the smallest id with ``keep: first``. Spark's form of
        the same rule is ``pipelines.paragraph_dedup.cuts_by_document``."""
        if documents.column("id").null_count:
            raise UsageError("paragraph_dedup: every document needs a non-null id")
        holders = prepared.group_by("key").aggregate([("id", "count"), ("id", "min")])
        duplicated = holders.filter(pc.greater(holders.column("id_count"), self.max_documents))
        cut = prepared.join(duplicated, "key", join_type="inner")
        if self.keep == "first":
            cut = cut.filter(pc.not_equal(cut.column("id"), cut.column("id_min")))
        rows = cut.select(["id", "key"]).group_by("id").aggregate([("key", "list")]).rename_columns(["id", CUTS])
        self.record(
            {
                "duplicated_segments": duplicated.num_rows,
                "segments_removed": cut.num_rows,
                "documents_changed": rows.num_rows,
            }
        )
        return rows, {}

    def applier(self, state: dict) -> "CutParagraphs":
        return CutParagraphs(self)

    def record(self, counts: dict) -> None:
        """Report the counts of a run (in memory or on Spark) as this stage's counters."""
        for event, n in counts.items():
            self.count(event, int(n))


class CutParagraphs(Applier):
    """Cuts from one task's texts the segments the corpus-wide count found repeated (decision rows:
    ``id`` and CUTS, for the documents with cuts only)."""

    def __init__(self, stage: ParagraphDedup):
        super().__init__(stage.name)
        self.rules = stage
        self.cuts: pa.Table | None = None

    def begin(self, key: str, decisions: pa.Table | None) -> None:
        self.cuts = decisions

    def process(self, batch: pa.Table) -> tuple[pa.Table, list[str | None]]:
        if self.cuts is None or self.cuts.num_rows == 0:
            return batch, [None] * batch.num_rows
        removals = (
            self.cuts.column(CUTS).take(pc.index_in(batch.column("id"), value_set=self.cuts.column("id"))).to_pylist()
        )
        texts, reasons = self.rules.remove(batch.column("text").to_pylist(), removals)
        return with_column(batch, "text", texts, batch.schema.field("text").type), reasons
