"""arXiv / LaTeX sources -> one document per paper, cleaned as RedPajama's arXiv recipe does.

Inputs: a ``.tex`` file (one paper); a paper's archive (``.tar``, ``.tar.gz``, ``.tgz``: its ``.tex`` files
are the paper); or arXiv's bulk archives (``arXiv_src_*.tar``), whose members are papers, each a ``.gz``
of a tar or of a single ``.tex``. Archives are read member by member (streaming). Per paper: the
argument-less macros its files define (``\\newcommand{\\x}{...}``, ``\\newcommand\\x{...}``,
``\\renewcommand``, ``\\def\\x{...}``) are collected; in each file, comments, everything before the first
sectioning command (the preamble, title and abstract block) and everything from the bibliography or
appendix on are removed, and the macros are expanded in what remains. The text stays LaTeX (math, emphasis
and section commands kept), as in RedPajama.

A file of a paper that is not text (a ``.tex`` that holds binary bytes) is a dropped row ``binary_file``;
figures and other non-``.tex`` members are counted as skipped records (``non_tex_file``); a paper none of
whose files has a section is dropped as ``no_sections``, a bulk archive's paper that is not gzip as
``error:malformed_record``; a cut archive keeps the papers before the cut and counts one ``error:truncated``.
"""

from __future__ import annotations

import io
import os
import re
import tarfile
import zlib
from typing import Iterator

from dataprep.core.config import InputConfig
from dataprep.core.errors import UsageError
from dataprep.core.stage import StageResult
from dataprep.core.stats import RECORDS_SKIPPED
from dataprep.core.storage import decoded_name, open_stream
from dataprep.readers.archives import ARCHIVE_ERRORS, member_name, open_tar
from dataprep.readers.batches import Batches, hash_id

KIND = "arxiv"
_SECTION = re.compile(
    r"\\(?:chapter|part|section|subsection|subsubsection|paragraph|subparagraph)\*?\s*(?:\[[^\]]*\])?\s*\{"
)
_END = re.compile(
    r"\\appendix\b|\\begin\{(?:thebibliography|references|REFERENCES)\}|\\bibliography\{|\\printbibliography\b"
    r"|\\end\{document\}"
)
_COMMENT = re.compile(r"(?<!\\)%.*")
_DEFINITION = re.compile(r"\\(?:(?:re)?newcommand\*?\s*\{?\s*(\\[A-Za-z@]+)\s*\}?|def\s*(\\[A-Za-z@]+))\s*(?=\{)")
_ARXIV_ID = re.compile(r"^(\d{4}\.\d{4,5}(?:v\d+)?|[a-z\-]+(?:\.[A-Z]{2})?/?\d{7}(?:v\d+)?)$")
_PAPER_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".gz", ".tex")


def read_arxiv(path: str, cfg: InputConfig, out: Batches) -> Iterator[StageResult]:
    out.kind = KIND
    name = os.path.basename(path)
    n = 0
    try:
        with open_stream(path, decompress=False) as raw:
            if name.endswith(".tex"):
                _paper(out, path, name, [(name, raw.read(cfg.max_document_bytes + 1))], cfg)
                return
            with open_tar(raw) as archive:
                loose: list[tuple[str, bytes]] = []  # a paper's own archive: its files
                for member in archive:
                    if not member.isfile():
                        continue
                    if out.full():
                        yield out.flush()
                    n += 1
                    file_name = decoded_name(member_name(member.name))
                    if member.size > cfg.max_document_bytes:  # not read: its header says how large it is
                        out.drop("too_large", id=hash_id(path, zlib.crc32(file_name.encode())))
                        continue
                    data = archive.extractfile(member).read()
                    out.bytes_read += len(data)
                    if _arxiv_id(os.path.basename(file_name)):  # a bulk archive's paper
                        _paper(out, path, os.path.basename(file_name), data, cfg)
                    elif file_name.endswith(".tex"):
                        loose.append((file_name, data))
                    else:
                        out.counters[f"{RECORDS_SKIPPED}non_tex_file"] += 1
                if loose:
                    _paper(out, path, name, loose, cfg)
    except ARCHIVE_ERRORS as exc:  # a cut or corrupt archive
        reason = "error:truncated" if n else "error:malformed_record"
        out.drop(reason, exc, id=hash_id(path, -1))


def _arxiv_id(name: str) -> str | None:
    """The arXiv id a file is named after (``2401.00001.gz``, ``hep-th9901001.tar.gz``), else None."""
    stem = name
    for suffix in _PAPER_SUFFIXES:
        stem = stem.removesuffix(suffix)
    return stem if _ARXIV_ID.match(stem) else None


def _paper_files(name: str, data: bytes, limit: int) -> list[tuple[str, bytes]] | None:
    """A bulk archive's paper: a gzipped tar of its files, or one gzipped ``.tex``; None when it expands past
    ``limit`` bytes (decompressing stops there). Raises ValueError if it is neither."""
    gz = zlib.decompressobj(wbits=31)
    try:
        data = gz.decompress(data, limit + 1)
    except zlib.error as exc:
        raise UsageError(f"{name}: not gzip: {exc}") from None
    if len(data) > limit:
        return None
    if not gz.eof:
        raise UsageError(f"{name}: not gzip: cut short")
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            return [(decoded_name(member_name(m.name)), tar.extractfile(m).read()) for m in tar if m.isfile()]
    except tarfile.ReadError:
        return [(name.removesuffix(".gz") + ".tex", data)]


def _paper(out: Batches, path: str, name: str, files: list[tuple[str, bytes]] | bytes, cfg: InputConfig) -> None:
    """One paper from its files, or from a bulk archive member's bytes."""
    arxiv_id = _arxiv_id(name)
    row = {
        "id": f"arxiv-{arxiv_id}" if arxiv_id else hash_id(path, zlib.crc32(decoded_name(name).encode())),
        "url": f"https://arxiv.org/abs/{arxiv_id}" if arxiv_id else None,
        "date": None,
    }
    if isinstance(files, bytes):
        try:
            files = _paper_files(name, files, cfg.max_document_bytes)
        except ValueError as exc:
            out.drop("error:malformed_record", exc, **row)
            return
        if files is None:
            out.drop("too_large", **row)
            return
    texts = []
    for file_name, data in files:
        if not file_name.endswith(".tex"):
            out.counters[f"{RECORDS_SKIPPED}non_tex_file"] += 1
            continue
        text = _text(data)
        if text is None:
            out.drop("binary_file", id=f"{row['id']}/{file_name}", url=row["url"])
        else:
            texts.append(text)
    out.keep_text(clean_tex(texts), cfg.max_document_bytes, empty="no_sections", **row)


def _text(data: bytes) -> str | None:
    """A file's text (UTF-8, else Latin-1 as older sources are), or None for binary bytes."""
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def clean_tex(files: list[str]) -> str:
    """A paper's files, each without comments, preamble and bibliography, argument-less macros expanded."""
    uncommented = [_COMMENT.sub("", re.sub(r"(?m)^[ \t]*%.*\n", "", text)) for text in files]
    macros = {}
    for text in uncommented:
        macros.update(macro_definitions(text))
    bodies = []
    for text in uncommented:
        start = _SECTION.search(text)
        if not start:
            continue
        body = text[start.start() :]
        end = _END.search(body)
        bodies.append(expand_macros(body[: end.start()] if end else body, macros).strip())
    return "\n\n".join(b for b in bodies if b) + "\n" if bodies else ""


def macro_definitions(text: str) -> dict[str, str]:
    """``\\name -> replacement`` for the macros ``text`` defines without arguments."""
    macros = {}
    for match in _DEFINITION.finditer(text):
        value = _braced(text, match.end())
        if value is not None and "#" not in value:
            macros[match.group(1) or match.group(2)] = value
    return macros


def expand_macros(text: str, macros: dict[str, str]) -> str:
    """``text`` with its argument-less macros replaced (nested ones too) and their definitions removed."""
    if not macros:
        return text
    text = _remove_definitions(text)
    pattern = re.compile(
        "(?:" + "|".join(re.escape(m) for m in sorted(macros, key=len, reverse=True)) + r")(?![A-Za-z@])"
    )
    for _ in range(4):  # a macro defined through another
        text, n = pattern.subn(lambda m: macros[m.group(0)], text)
        if not n:
            break
    return text


def _remove_definitions(text: str) -> str:
    out, pos = [], 0
    for match in _DEFINITION.finditer(text):
        value = _braced(text, match.end())
        if value is None:
            continue
        out.append(text[pos : match.start()])
        pos = match.end() + len(value) + 2
    return "".join(out) + text[pos:]


def _braced(text: str, start: int) -> str | None:
    """The content of the balanced ``{...}`` group at ``start``, or None."""
    if start >= len(text) or text[start] != "{":
        return None
    depth = 0
    for i in range(start, len(text)):
        char = text[i]
        if char == "{" and text[i - 1] != "\\":
            depth += 1
        elif char == "}" and text[i - 1] != "\\":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i]
    return None
