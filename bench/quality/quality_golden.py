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
import json
import os
import subprocess
import sys
import tempfile

from bench.common.paths import ROOT, SHARED
from bench.datatrove.environment import datatrove_python
from tests.support.quality_parity import (
    C4_VARIANTS,
    FINEWEB_OFF,
    FINEWEB_RULES,
    GOPHER_Q_OFF,
    GOPHER_Q_RULES,
    GOPHER_R_OFF,
    GOPHER_R_RULES,
    build_texts,
    sha1,
)

GOLDEN = ROOT / "tests" / "data" / "quality_golden.json"

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

    from datatrove.pipeline.filters import (
        C4QualityFilter,
        FineWebQualityFilter,
        GopherQualityFilter,
        GopherRepetitionFilter,
    )
    from datatrove.utils.text import split_into_sentences, split_into_words

    warnings.filterwarnings("ignore")
    filters = {
        "gopher_quality": {
            "all": GopherQualityFilter(),
            **{k: GopherQualityFilter(**{**GOPHER_Q_OFF, **v}) for k, v in GOPHER_Q_RULES.items()},
        },
        "gopher_repetition": {
            "all": GopherRepetitionFilter(),
            **{k: GopherRepetitionFilter(**{**GOPHER_R_OFF, **v}) for k, v in GOPHER_R_RULES.items()},
        },
        "fineweb_quality": {
            "all": FineWebQualityFilter(),
            **{k: FineWebQualityFilter(**{**FINEWEB_OFF, **v}) for k, v in FINEWEB_RULES.items()},
        },
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
        subprocess.run(
            [dt_python, "-m", "bench.quality.quality_golden", "--datatrove-side", in_path, out_path], check=True
        )
        with open(out_path, encoding="utf-8") as fh:
            decisions = json.load(fh)
    for t, d in zip(texts, decisions):
        assert t["id"] == d["id"]
        d["text_sha1"] = sha1(t["text"])
    payload = {
        "generator": "bench/quality/quality_golden.py",
        "datatrove_version": "0.10.1",
        "note": "texts are rebuilt from ../shared/data by tests.support.quality_parity.build_texts; text_sha1 "
        "checks them",
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
