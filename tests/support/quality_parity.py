"""The quality-parity set: every text of it rebuilt from ../shared/data in a fixed order, and datatrove's
filter settings that leave one rule on at a time. tests/dataprep/quality/test_quality_parity.py compares our
filters with tests/data/quality_golden.json, which bench/quality/quality_golden.py (run from the repository
root, importing ``tests.support.quality_parity``) writes. Standard library only at import: the datatrove
side imports it in its own venv."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

# Each rule alone: datatrove kwargs that switch every other rule of the filter off.
GOPHER_Q_OFF = dict(
    min_doc_words=None,
    max_doc_words=None,
    min_avg_word_length=None,
    max_avg_word_length=None,
    max_symbol_word_ratio=None,
    max_bullet_lines_ratio=None,
    max_ellipsis_lines_ratio=None,
    max_non_alpha_words_ratio=None,
    min_stop_words=None,
)
GOPHER_Q_RULES = {
    "min_doc_words": {"min_doc_words": 50},
    "max_doc_words": {"max_doc_words": 100000},
    "min_avg_word_length": {"min_avg_word_length": 3},
    "max_avg_word_length": {"max_avg_word_length": 10},
    "max_symbol_word_ratio": {"max_symbol_word_ratio": 0.1},
    "max_bullet_lines_ratio": {"max_bullet_lines_ratio": 0.9},
    "max_ellipsis_lines_ratio": {"max_ellipsis_lines_ratio": 0.3},
    "max_non_alpha_words_ratio": {"max_non_alpha_words_ratio": 0.8},
    "min_stop_words": {"min_stop_words": 2},
}
GOPHER_R_OFF = dict(
    dup_line_frac=None,
    dup_para_frac=None,
    dup_line_char_frac=None,
    dup_para_char_frac=None,
    top_n_grams=(),
    dup_n_grams=(),
)
GOPHER_R_RULES = {
    "dup_line_frac": {"dup_line_frac": 0.3},
    "dup_para_frac": {"dup_para_frac": 0.3},
    "dup_line_char_frac": {"dup_line_char_frac": 0.2},
    "dup_para_char_frac": {"dup_para_char_frac": 0.2},
    **{f"top_{n}_gram": {"top_n_grams": ((n, f),)} for n, f in ((2, 0.2), (3, 0.18), (4, 0.16))},
    **{
        f"dup_{n}_gram": {"dup_n_grams": ((n, f),)}
        for n, f in ((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10))
    },
}
FINEWEB_OFF = dict(line_punct_thr=0.0, short_line_thr=1.0, char_duplicates_ratio=1.0, new_line_ratio=float("inf"))
FINEWEB_RULES = {
    "line_punct_thr": {"line_punct_thr": 0.12},
    "short_line_thr": {"short_line_thr": 0.67},
    "char_duplicates_ratio": {"char_duplicates_ratio": 0.01},
    "new_line_ratio": {"new_line_ratio": 0.3},
}
C4_VARIANTS = {"default": {}, "fineweb": {"filter_no_terminal_punct": False}}


def _html_text(payload: bytes) -> str:
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding

    return extract_plain_text(bytes_to_str(payload, detect_encoding(payload)), main_content=True)


def build_texts(shared: Path) -> list[dict]:
    """Every text of the parity set, in a fixed order, with a stable id."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    texts: list[dict] = []
    for path in sorted((shared / "documents").iterdir()):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                if line.strip():
                    texts.append({"id": f"documents/{path.name}:{i}", "text": json.loads(line)["text"]})
    for path in sorted((shared / "warc").glob("*/*")):
        if "malformed" in str(path) or path.name.endswith((".wat", ".wat.gz")):
            continue
        with open(path, "rb") as fh:
            records = ArchiveIterator(
                fh, record_types=WarcRecordType.response | WarcRecordType.conversion, parse_http=True
            )
            for record in records:
                body = record.reader.read()
                if record.record_type == WarcRecordType.conversion:
                    text = body.decode("utf-8", "replace")
                else:
                    ctype = (record.http_headers.get("Content-Type") or "") if record.http_headers else ""
                    if "html" not in ctype.lower() and b"<html" not in body[:2000].lower():
                        continue
                    text = _html_text(body)
                texts.append({"id": f"warc/{path.parent.name}/{path.name}:{record.record_id}", "text": text})
    for page in sorted((shared / "html" / "trafilatura-eval" / "pages").glob("*.html.gz")):
        texts.append({"id": f"trafilatura-eval/{page.name}", "text": _html_text(gzip.decompress(page.read_bytes()))})
    return texts


def sha1(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()
