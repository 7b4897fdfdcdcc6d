"""Write tests/data/quality_golden.json: datatrove's decisions on real texts, for the parity tests.

The texts are the shared documents, the main text of every HTML page in the shared WARCs (and the
WET conversions), and the trafilatura-eval pages, extracted with resiliparse. For each text it
records datatrove 0.10.1's verdict of GopherQuality, GopherRepetition, C4Quality and FineWebQuality
with default settings, the verdict of each rule on its own, C4's rewritten text, and spaCy's word
count. Run with the ccpretrain venv (it calls .venv-datatrove for the datatrove half):

    python -m bench.quality.quality_golden            # needs ../shared/data and bash bench/datatrove/datatrove_env.sh
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common.paths import ROOT, SHARED
from bench.datatrove.environment import datatrove_python

GOLDEN = ROOT / "tests" / "data" / "quality_golden.json"

# Each rule alone: datatrove kwargs that switch every other rule of the filter off.
GOPHER_Q_OFF = dict(
    min_doc_words=None, max_doc_words=None, min_avg_word_length=None, max_avg_word_length=None, max_symbol_word_ratio=None,
    max_bullet_lines_ratio=None, max_ellipsis_lines_ratio=None, max_non_alpha_words_ratio=None, min_stop_words=None,
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
GOPHER_R_OFF = dict(dup_line_frac=None, dup_para_frac=None, dup_line_char_frac=None, dup_para_char_frac=None, top_n_grams=(), dup_n_grams=())
GOPHER_R_RULES = {
    "dup_line_frac": {"dup_line_frac": 0.3},
    "dup_para_frac": {"dup_para_frac": 0.3},
    "dup_line_char_frac": {"dup_line_char_frac": 0.2},
    "dup_para_char_frac": {"dup_para_char_frac": 0.2},
    **{f"top_{n}_gram": {"top_n_grams": ((n, f),)} for n, f in ((2, 0.2), (3, 0.18), (4, 0.16))},
    **{f"dup_{n}_gram": {"dup_n_grams": ((n, f),)} for n, f in ((5, 0.15), (6, 0.14), (7, 0.13), (8, 0.12), (9, 0.11), (10, 0.10))},
}
FINEWEB_OFF = dict(line_punct_thr=0.0, short_line_thr=1.0, char_duplicates_ratio=1.0, new_line_ratio=float("inf"))
FINEWEB_RULES = {
    "line_punct_thr": {"line_punct_thr": 0.12},
    "short_line_thr": {"short_line_thr": 0.67},
    "char_duplicates_ratio": {"char_duplicates_ratio": 0.01},
    "new_line_ratio": {"new_line_ratio": 0.3},
}
C4_VARIANTS = {"default": {}, "fineweb": {"filter_no_terminal_punct": False}}


# ---------------------------------------------------------------------------------------------
# Texts (ccpretrain side)


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
            records = ArchiveIterator(fh, record_types=WarcRecordType.response | WarcRecordType.conversion, parse_http=True)
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


# ---------------------------------------------------------------------------------------------
# Decisions (datatrove side, run inside .venv-datatrove)


def _verdict(filt, text: str) -> tuple[str | None, str]:
    """(reason or None if kept, text after the filter); errors become 'error:<Exception>'."""
    from datatrove.data import Document

    doc = Document(text=text, id="x")
    try:
        result = filt.filter(doc)
    except Exception as exc:  # noqa: BLE001 - datatrove crashes on some edge texts; record it
        return f"error:{type(exc).__name__}", text
    if result is True:
        return None, doc.text
    return (result[1] if isinstance(result, tuple) else "dropped"), doc.text


def datatrove_decisions(in_path: str, out_path: str) -> None:
    import warnings

    from datatrove.pipeline.filters import C4QualityFilter, FineWebQualityFilter, GopherQualityFilter, GopherRepetitionFilter
    from datatrove.utils.text import split_into_sentences, split_into_words

    warnings.filterwarnings("ignore")
    filters = {
        "gopher_quality": {"all": GopherQualityFilter(), **{k: GopherQualityFilter(**{**GOPHER_Q_OFF, **v}) for k, v in GOPHER_Q_RULES.items()}},
        "gopher_repetition": {"all": GopherRepetitionFilter(), **{k: GopherRepetitionFilter(**{**GOPHER_R_OFF, **v}) for k, v in GOPHER_R_RULES.items()}},
        "fineweb_quality": {"all": FineWebQualityFilter(), **{k: FineWebQualityFilter(**{**FINEWEB_OFF, **v}) for k, v in FINEWEB_RULES.items()}},
    }
    c4 = {name: C4QualityFilter(**kwargs) for name, kwargs in C4_VARIANTS.items()}
    out = []
    with open(in_path, encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            text = doc["text"]
            row = {"id": doc["id"], "n_words": len(split_into_words(text)) if text.strip() else 0}
            row["n_sentences"] = len(split_into_sentences(text)) if text.strip() else 0
            for stage, variants in filters.items():
                row[stage] = {rule: _verdict(f, text)[0] for rule, f in variants.items()}
            row["c4_quality"] = {}
            for name, f in c4.items():
                reason, new_text = _verdict(f, text)
                row["c4_quality"][name] = {"reason": reason, "text_sha1": None if reason else sha1(new_text)}
            out.append(row)
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump(out, fh)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datatrove-side", nargs=2, metavar=("IN", "OUT"), help=argparse.SUPPRESS)
    parser.add_argument("--output", default=str(GOLDEN))
    args = parser.parse_args()
    if args.datatrove_side:
        datatrove_decisions(*args.datatrove_side)
        return 0
    dt_python = datatrove_python()
    texts = build_texts(SHARED)
    with tempfile.TemporaryDirectory() as tmp:
        in_path, out_path = os.path.join(tmp, "in.jsonl"), os.path.join(tmp, "out.json")
        with open(in_path, "w", encoding="utf-8") as fh:
            for t in texts:
                fh.write(json.dumps(t, ensure_ascii=False) + "\n")
        subprocess.run([dt_python, "-m", "bench.quality.quality_golden", "--datatrove-side", in_path, out_path], check=True)
        with open(out_path, encoding="utf-8") as fh:
            decisions = json.load(fh)
    for t, d in zip(texts, decisions):
        assert t["id"] == d["id"]
        d["text_sha1"] = sha1(t["text"])
    payload = {
        "generator": "bench/quality/quality_golden.py",
        "datatrove_version": "0.10.1",
        "note": "texts are rebuilt from ../shared/data by bench.quality.quality_golden.build_texts; text_sha1 checks "
                "them",
        "documents": decisions,
    }
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as fh:
        json.dump(payload, fh, ensure_ascii=False, indent=0)
    kept = sum(d["gopher_quality"]["all"] is None for d in decisions)
    print(f"wrote {args.output}: {len(decisions)} texts ({kept} pass Gopher quality)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
