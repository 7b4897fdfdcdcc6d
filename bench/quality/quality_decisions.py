"""Every decision of the heuristic quality stages on a few thousand real texts, to show a speed change
left them all as they were: save them with one checkout's code, check them with another's. Each side runs
from the root of its own checkout (``python -m`` puts that folder first on the path, so the code judged is
the checkout's own):

    (cd ../main && python -m bench.quality.quality_decisions --save /tmp/decisions.json)   # the base
    python -m bench.quality.quality_decisions --check /tmp/decisions.json                  # this checkout

Texts (needs ../shared/data): the pages profile_extract.py reads, extracted, and the parity set
(shared documents, WARC main text, trafilatura-eval pages), each also with its first third appended and with every third
line doubled (so the repetition rules fire), and the lingua sentences of each of 75 languages in documents of 10 and of
30 sentences (lines, then paragraphs), read with their own language's words. Stages: FineWeb's chain and ccpretrain's
(less the classifier) with their settings, and each rule of the parity tests on its own; every stage judges every text.
A decision is the drop reason and, where the stage rewrites the text (C4), the kept text's sha1. The n-gram statistics
behind the repetition rules are compared too.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from bench.common.paths import ROOT, SHARED
from tests.support.quality_parity import (
    FINEWEB_OFF,
    FINEWEB_RULES,
    GOPHER_Q_OFF,
    GOPHER_Q_RULES,
    GOPHER_R_OFF,
    GOPHER_R_RULES,
    build_texts,
)

RENAMED = {"max_non_alpha_words_ratio": "min_alpha_words_ratio"}


def texts() -> list[tuple[str, str]]:
    """(text, language) pairs."""
    from bench.common.make_bench_warc import load_pages
    from bench.extraction.bench_extract import warc_pages
    from dataprep.html.charset import decode_html
    from dataprep.html.extract import Extract

    extract = Extract()
    pages = [extract.extract(decode_html(html, None)) for _, html in load_pages()] + [
        extract.extract(p) for p in warc_pages()
    ]
    parity = pages + [t["text"] for t in build_texts(SHARED)]
    out = [(t, "en") for t in parity]
    for t in parity:
        lines = t.split("\n")
        out.append((t + "\n" + t[: len(t) // 3], "en"))
        out.append(("\n".join(line for i, line in enumerate(lines) for _ in range(2 if i % 3 == 0 else 1)), "en"))
    by_lang: dict[str, list[str]] = {}
    for line in (SHARED / "langid" / "lingua-sentences-75langs-300each.jsonl").open(encoding="utf-8"):
        row = json.loads(line)
        by_lang.setdefault(row["lang"], []).append(row["text"])
    for lang, sentences in sorted(by_lang.items()):
        out += [("\n".join(sentences[i : i + 10]), lang) for i in range(0, len(sentences), 10)]
        out += [
            ("\n\n".join("\n".join(sentences[j : j + 3]) for j in range(i, i + 30, 3)), lang)
            for i in range(0, len(sentences), 30)
        ]
    return out


def stages() -> dict[str, object]:
    from dataprep.core.config import load_config
    from dataprep.quality.fineweb import FineWebQuality
    from dataprep.quality.gopher import GopherQuality
    from dataprep.quality.gopher_repetition import GopherRepetition

    def chain(name: str) -> list:
        cfg = {
            "input": {"paths": []},
            "output": {"dir": "/tmp/unused"},
            "stages": [{"include": str(ROOT / "configs" / "pipeline" / name)}],
        }
        return [s for s in load_config(cfg).stages if s.name != "quality_classifier"]

    def ours(params: dict) -> dict:
        return {RENAMED.get(k, k): (list(v) if isinstance(v, tuple) else v) for k, v in params.items()}

    out = {f"fineweb/{s.name}": s for s in chain("fineweb_filters.yaml")}
    out |= {f"ccpretrain/{s.name}": s for s in chain("ccpretrain_filters.yaml")}
    out |= {f"gopher_quality/{k}": GopherQuality(**ours({**GOPHER_Q_OFF, **v})) for k, v in GOPHER_Q_RULES.items()}
    out |= {
        f"gopher_repetition/{k}": GopherRepetition(**ours({**GOPHER_R_OFF, **v})) for k, v in GOPHER_R_RULES.items()
    }
    out |= {f"fineweb_quality/{k}": FineWebQuality(**ours({**FINEWEB_OFF, **v})) for k, v in FINEWEB_RULES.items()}
    return out


def ngram_stats(text: str, language: str) -> list[int]:
    from dataprep.quality.gopher_repetition import NGrams
    from dataprep.quality.languages import split_words

    grams = NGrams(split_words(text, language))
    return [grams.top_chars(n) if len(grams.words) >= n else -1 for n in (2, 3, 4)] + [
        grams.duplicate_chars(n) for n in range(5, 11)
    ]


def decisions() -> dict[str, list]:
    docs = texts()
    out: dict[str, list] = {"text_sha1": [hashlib.sha1(text.encode()).hexdigest() for text, _ in docs]}
    for name, stage in stages().items():
        rows = []
        for text, lang in docs:
            reason, kept = stage.decide(text, lang)
            rows.append([reason, None if kept is text else hashlib.sha1(kept.encode()).hexdigest()])
        out[name] = rows
    out["ngram_stats"] = [ngram_stats(text, lang) for text, lang in docs]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--save", help="write the decisions here")
    group.add_argument("--check", help="compare with the decisions in this file")
    args = parser.parse_args()
    got = decisions()
    n_docs = len(got["ngram_stats"])
    if args.save:
        Path(args.save).write_text(json.dumps(got))
        print(f"{n_docs} texts x {len(got) - 2} stages: decisions written to {args.save}")
        return
    expected = json.loads(Path(args.check).read_text())
    differ = {
        name: [i for i, (a, b) in enumerate(zip(rows, got.get(name, []))) if a != b] for name, rows in expected.items()
    }
    differ = {name: idx for name, idx in differ.items() if idx or len(expected[name]) != len(got.get(name, []))}
    print(
        f"{n_docs} texts x {len(got) - 2} stages (+ texts, n-gram statistics): {len(differ)} differ from {args.check}"
    )
    for name, idx in differ.items():
        print(f"  {name}: {len(idx)} texts, e.g. {idx[:10]}")
    if differ or set(expected) != set(got):
        sys.exit(1)


if __name__ == "__main__":
    main()
