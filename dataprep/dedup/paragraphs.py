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
paragraph. On Spark (its runner on the Spark side) keys are shuffled
by hash, never gathered on the driver.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc
import xxhash
from pydantic import Field

from dataprep.core.applier import Applier
from dataprep.dedup.normalize import Normalization, normalize_many
from dataprep.core.registry import register
from dataprep.core.stage import GlobalStage, StageResult, split_by_reason, with_column

REASON = "duplicate_paragraphs"
CUTS = "_cuts"  # decision rows: the keys to cut from a document
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

    unit: Literal["line", "paragraph", "sentence"] = Field("line", description="what a segment is: a line, a blank-line separated paragraph, or a sentence")
    span: int = Field(1, ge=1, description="segments per hashed window (datatrove: 3 sentences); a duplicated window removes all its segments")
    normalization: Normalization = "fineweb"
    max_documents: int = Field(1, ge=1, description="a segment found in more documents than this is duplicated")
    keep: Literal["first", "none"] = Field("first", description="first: the smallest id keeps its copy; none: removed everywhere (boilerplate)")
    min_chars: int = Field(0, ge=0, description="normalized windows shorter than this are never removed")
    min_remaining_chars: int = Field(100, ge=0, description="a document that lost segments is dropped below this many characters")

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
        return pa.RecordBatch.from_arrays([pa.array(owners, pa.string()), pa.array(keys, pa.int64())], names=["id", "key"])

    def remove(self, texts: list[str | None], removals: list[list[int] | None]) -> tuple[list[str | None], list[str | None]]:
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

    def removals_by_document(self, ids: list[str], found: list[list[tuple[int, list[int]]]]) -> tuple[list[list[int]], dict]:
        """Per document, the keys to cut from it, and the counts the Spark runner reports too."""
        holders: dict[int, list[str]] = defaultdict(list)
        for doc_id, windows in zip(ids, found):
            for key in {k for k, _ in windows}:
                holders[key].append(doc_id)
        cut: dict[str, list[int]] = defaultdict(list)
        duplicated = 0
        for key, docs in holders.items():
            if len(docs) <= self.max_documents:
                continue
            duplicated += 1
            first = min(docs) if self.keep == "first" else None
            for doc_id in docs:
                if doc_id != first:
                    cut[doc_id].append(key)
        counts = {"duplicated_segments": duplicated, "segments_removed": sum(map(len, cut.values())), "documents_changed": len(cut)}
        return [cut.get(i) for i in ids], counts

    def record(self, counts: dict) -> None:
        """Report the counts of a run (in memory or on Spark) as this stage's counters."""
        for event, n in counts.items():
            self.count(event, int(n))

    def run_local(self, table: pa.Table) -> StageResult:
        ids = table.column("id").to_pylist()
        if any(i is None for i in ids):
            raise ValueError("paragraph_dedup: every document needs a non-null id")
        texts = table.column("text").to_pylist()
        removals, counts = self.removals_by_document(ids, self.windows(texts))
        self.record(counts)
        new_texts, reasons = self.remove(texts, removals)
        table = with_column(table, "text", pa.array(new_texts, table.schema.field("text").type))
        return split_by_reason(table, reasons, self.name)


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
        removals = self.cuts.column(CUTS).take(pc.index_in(batch.column("id"), value_set=self.cuts.column("id"))).to_pylist()
        texts, reasons = self.rules.remove(batch.column("text").to_pylist(), removals)
        return with_column(batch, "text", texts, batch.schema.field("text").type), reasons
