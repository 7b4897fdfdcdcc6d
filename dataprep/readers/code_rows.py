"""One source file -> one row of the code reader: its id, repository, path, language, licence and size,
kept as text or dropped with the reason it cannot be text (``binary``, ``too_large``, ``undecodable``)."""

from __future__ import annotations

import hashlib

from dataprep.code.languages import is_binary_name, language
from dataprep.code.licenses import NO_LICENSE
from dataprep.core.config import InputConfig
from dataprep.core.storage import decoded_name
from dataprep.readers.batches import Batches


def add_file(
    out: Batches,
    cfg: InputConfig,
    repo: str,
    path: str,
    data: bytes,
    license: str | None,
    size: int,
    lang: str | None = None,
    doc_id: str | None = None,
) -> None:
    """Keep a file's text, or drop it with the reason it cannot be text."""
    out.bytes_read += len(data)
    row = {
        "id": doc_id or file_id(repo, path),
        "url": None,
        "date": None,
        "path": path,
        "repo": repo,
        "language": lang or language(path, data[:256]),
        "license": license or NO_LICENSE,
        "size": size,
    }
    if is_binary_name(path) or b"\0" in data[:8192]:
        return out.drop("binary", **row)
    if size > cfg.max_document_bytes:
        return out.drop("too_large", **row)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return out.drop("undecodable", **row)
    out.keep_text(text, cfg.max_document_bytes, **row)


def file_id(repo: str, path: str) -> str:
    """A file's id from its repository and path: the same file read from a folder or an archive is one id."""
    return "code-" + hashlib.blake2b(f"{repo}\0{path}".encode(), digest_size=16).hexdigest()


def text_name(out: Batches, name: str) -> str:
    """A file name that is not UTF-8 is kept, decoded with U+FFFD for its bad bytes, and counted."""
    text = decoded_name(name)
    if text != name:
        out.counters["file_names_not_utf8"] += 1
    return text
