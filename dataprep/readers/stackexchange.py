"""StackExchange dumps (``Posts.xml``, also ``.gz`` / ``.bz2``) -> one document per question with its answers.

A question's answers may come before or after it in the file, so rows are first spilled to a temporary
SQLite file on the worker's local disk (the system's temporary folder; one pass over the input, memory
holds one row), then read back question by question with their answers, highest score first (ties: the older answer
first). That keeps a worker's memory flat on a dump of any size for the price of writing its text once to local disk.

A document is the title, the question, then each answer after a line ``Answer:`` (``Accepted answer:``
for the one the asker accepted); post bodies are HTML, turned into text by ``extract``'s Resiliparse
engine without main-content heuristics (a post is all content; code blocks keep their lines). Rows that
are neither questions nor answers (tag wikis, ...) are counted as skipped records (``post_type_N``), as
are answers whose question is not in the file (``answer_without_question``). A row that is not
well-formed XML is an ``error:malformed_record`` drop; a file cut short keeps every row before the cut
plus one ``error:truncated``. The id is ``<site>-<question id>``, the site being the dump's folder name
(``cooking.stackexchange.com/Posts.xml``), which also gives the url.
"""

from __future__ import annotations

import functools
import logging
import os
import sqlite3
import tempfile
import xml.etree.ElementTree as ET
import zlib
from typing import Iterator

from dataprep.core.config import InputConfig
from dataprep.core.stage import StageResult
from dataprep.core.stats import RECORDS_SKIPPED
from dataprep.core.storage import open_stream
from dataprep.readers.batches import Batches, bounded_lines, hash_id
from dataprep.readers.wikipedia import decompressed

log = logging.getLogger(__name__)
KIND = "stackexchange"
QUESTION, ANSWER = "1", "2"
_INT64 = 1 << 63
_SCHEMA = """
PRAGMA journal_mode = OFF;
PRAGMA synchronous = OFF;
CREATE TABLE question (id INTEGER PRIMARY KEY, title TEXT, body TEXT, accepted INTEGER, date TEXT);
CREATE TABLE answer (id INTEGER PRIMARY KEY, parent INTEGER, score INTEGER, body TEXT);
"""


def read_stackexchange(path: str, cfg: InputConfig, out: Batches) -> Iterator[StageResult]:
    out.kind = KIND
    with tempfile.TemporaryDirectory(prefix="posts-") as tmp:
        db = sqlite3.connect(os.path.join(tmp, "posts.sqlite"))
        try:
            db.executescript(_SCHEMA)
            yield from _spill(path, cfg, out, db)
            db.execute("CREATE INDEX by_parent ON answer (parent, score DESC, id)")
            yield from _documents(path, cfg, out, db)
        finally:
            db.close()


def _spill(path: str, cfg: InputConfig, out: Batches, db: sqlite3.Connection) -> Iterator[StageResult]:
    """Every question and answer row of the file into ``db``; other rows counted, broken ones dropped."""
    closed, pending, n = False, None, 0
    with open_stream(path, decompress=False) as raw:
        try:
            for line in bounded_lines(decompressed(raw, path), cfg.max_document_bytes * 2 + 65536):
                if pending is not None:  # a row is judged once the next line shows the file went on
                    n += 1
                    _row(pending, path, n, cfg, out, db)
                    pending = None
                    if out.full():
                        yield out.flush()
                if line is None:  # a row too long to hold
                    n += 1
                    out.drop("too_large", id=hash_id(path, n))
                    continue
                stripped = line.strip()
                if stripped.startswith(b"<row"):
                    pending = stripped
                elif stripped.startswith(b"</posts>"):
                    closed = True
        except (EOFError, OSError, zlib.error) as exc:  # a truncated or corrupt compressed file
            if pending is not None:  # the last whole line read is kept if it is a whole row
                _row(pending, path, n + 1, cfg, out, db, broken_reason=None)
            log.warning("%s: error:truncated after %d rows: %s", path, n, exc)
            out.drop("error:truncated", exc, id=hash_id(path, -1))
            return
    if pending is not None:
        _row(pending, path, n + 1, cfg, out, db, broken_reason="error:malformed_record" if closed else None)
    if not closed:  # the file ends before </posts>: its last row, if cut, is part of this one error
        log.warning("%s: error:truncated after %d rows", path, n)
        out.drop("error:truncated", id=hash_id(path, -1))


def _row(
    line: bytes,
    path: str,
    n: int,
    cfg: InputConfig,
    out: Batches,
    db: sqlite3.Connection,
    broken_reason: str | None = "error:malformed_record",
) -> None:
    out.bytes_read += len(line)
    try:
        row = ET.fromstring(line).attrib
        post_id, kind = _integer(row["Id"]), row.get("PostTypeId")
        accepted, parent = _integer(row.get("AcceptedAnswerId")), _integer(row.get("ParentId"))
    except (ET.ParseError, KeyError, ValueError) as exc:
        if broken_reason:
            out.drop(broken_reason, exc, id=hash_id(path, n))
        return
    body = row.get("Body", "")
    if len(body) > cfg.max_document_bytes:
        out.drop("too_large", id=hash_id(path, n))
    elif kind == QUESTION:
        db.execute(
            "INSERT OR REPLACE INTO question VALUES (?, ?, ?, ?, ?)",
            (post_id, row.get("Title", ""), body, accepted, row.get("CreationDate")),
        )
    elif kind == ANSWER and parent is not None:
        db.execute(
            "INSERT OR REPLACE INTO answer VALUES (?, ?, ?, ?)", (post_id, parent, _score(row.get("Score")), body)
        )
    else:
        out.counters[f"{RECORDS_SKIPPED}post_type_{kind}"] += 1


def _integer(text: str | None) -> int | None:
    """An id attribute as SQLite stores it; ValueError (a malformed row) when it is not one."""
    if not text:
        return None
    value = int(text)
    if not -_INT64 <= value < _INT64:
        raise ValueError(f"{text[:40]} does not fit a 64-bit integer")
    return value


def _score(text: str | None) -> int:
    """An answer's score, held within SQLite's integers (a score past them still ranks first or last); 0
    when missing or not a number."""
    try:
        return max(-_INT64, min(int(text or 0), _INT64 - 1))
    except ValueError:
        return 0


def _documents(path: str, cfg: InputConfig, out: Batches, db: sqlite3.Connection) -> Iterator[StageResult]:
    site = os.path.basename(os.path.dirname(path.rstrip("/")))
    site = site if "." in site else None
    for qid, title, body, accepted, date in db.execute("SELECT * FROM question ORDER BY id"):
        if out.full():
            yield out.flush()
        row = {
            "id": f"{site or 'stackexchange'}-{qid}",
            "url": f"https://{site}/questions/{qid}" if site else None,
            "date": date,
        }
        parts = [title.strip(), _text(body)]
        for aid, answer in db.execute("SELECT id, body FROM answer WHERE parent = ? ORDER BY score DESC, id", (qid,)):
            parts.append(("Accepted answer:\n" if aid == accepted else "Answer:\n") + _text(answer))
        out.keep_text("\n\n".join(p for p in parts if p), cfg.max_document_bytes, **row)
    (orphans,) = db.execute("SELECT count(*) FROM answer WHERE parent NOT IN (SELECT id FROM question)").fetchone()
    if orphans:
        out.counters[f"{RECORDS_SKIPPED}answer_without_question"] += orphans


def _text(html: str) -> str:
    """A post's HTML as text: the extract stage's Resiliparse engine, all of the post kept."""
    return _extractor().extract(html) if html else ""


@functools.cache
def _extractor():
    from dataprep.html.extract import Extract

    return Extract(engine="resiliparse", main_content=False)
