"""Plain-text books (Project Gutenberg ``.txt``, also ``.gz``) -> one document per book, kept whole.

Gutenberg's header (title page data, the licence summary) ends at its ``*** START OF THE PROJECT
GUTENBERG EBOOK ... ***`` line and its footer (the full licence) starts at ``*** END OF ...``; older files
say ``*END*THE SMALL PRINT!``, ``***START OF THIS PROJECT GUTENBERG EBOOK``, ``End of the Project Gutenberg
EBook of ...``. Both are cut, then the producers' credit lines at the top of the text (``Produced by
...``). A book without the markers (not from Gutenberg) is kept as it is. Chapters are never split: a
book is one document, its id ``gutenberg-<ebook number>`` when the header gives one.
"""

from __future__ import annotations

import re
import zlib
from typing import Iterator

from dataprep.core.config import InputConfig
from dataprep.core.stage import StageResult
from dataprep.core.storage import open_stream
from dataprep.readers.batches import Batches, hash_id

KIND = "books"
_START = re.compile(
    r"^\s*(\*\*\*\s*START OF (THE|THIS) PROJECT GUTENBERG E(BOOK|TEXT)|\*END\*THE SMALL PRINT!).*$",
    re.IGNORECASE | re.MULTILINE,
)
_END = re.compile(r"^\s*(\*\*\*\s*)?END OF (THE |THIS )?PROJECT GUTENBERG.*$", re.IGNORECASE | re.MULTILINE)
_CREDITS = re.compile(
    r"^(Produced by|Transcribed (from|by)|E-?text prepared by|This (e-?book|etext) was produced by)", re.IGNORECASE
)
_EBOOK_NUMBER = re.compile(r"\[E-?(?:Book|Text) #(\d+)\]", re.IGNORECASE)


def read_book(path: str, cfg: InputConfig, out: Batches) -> Iterator[StageResult]:
    out.kind = KIND
    try:
        with open_stream(path) as fh:
            data = fh.read(cfg.max_document_bytes + 1)
    except (EOFError, OSError, zlib.error) as exc:  # a cut .gz: a book is whole or not at all
        out.drop("error:truncated", exc, id=hash_id(path, 0))
        return
    out.bytes_read += len(data)
    text = _decode(data)
    number = _EBOOK_NUMBER.search(text[:20000])
    row = {
        "id": f"gutenberg-{number.group(1)}" if number else hash_id(path, 0),
        "url": f"https://www.gutenberg.org/ebooks/{number.group(1)}" if number else None,
        "date": None,
    }
    if len(data) > cfg.max_document_bytes:
        out.drop("too_large", **row)
    elif not (body := strip_gutenberg(text)).strip():
        out.drop("empty", **row)
    else:
        out.keep(text=body, **row)
    yield from ()  # one book: iter_documents flushes it


def _decode(data: bytes) -> str:
    """UTF-8 (newer files, a BOM dropped), else Windows-1252 (older ones: Latin-1 and smart quotes)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = data.decode("cp1252", errors="replace")
    return text.replace("\r\n", "\n")


def strip_gutenberg(text: str) -> str:
    """The book without Gutenberg's header, footer, licence and producer credits; unchanged without markers."""
    start = _START.search(text)
    if start:
        text = text[start.end() :]
    end = _END.search(text)
    if end:
        text = text[: end.start()]
    paragraphs = text.strip("\n").split("\n\n")
    while paragraphs and (not paragraphs[0].strip() or _CREDITS.match(paragraphs[0].strip())):
        paragraphs.pop(0)
    return "\n\n".join(paragraphs).strip() + "\n" if paragraphs else ""
