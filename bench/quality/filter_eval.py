"""What each quality preset costs on labelled pages: per rule, the good pages it drops and the bad pages
only it catches; per preset, the share of good pages kept and the bad pages kept.

    python -m bench.quality.filter_eval                          # both presets, needs ../shared/data
    python -m bench.quality.filter_eval --examples 2             # also name the pages behind each figure
    python -m bench.quality.filter_eval --split tune             # per-rule tables of one half only

The labels are tests/data/filter_eval.jsonl: one line per page, ``label`` good/bad, its ``split``, a
``category`` and the page's ``lang``. The split is fixed in the file: rules and thresholds are chosen
on the ``tune`` half and judged on the ``heldout`` half. It was drawn once, stratified by label and
source: pages grouped by URL (a WARC record and its WET text stay together), sorted by label, source,
category and the SHA-1 of the URL (or file, id, text), and dealt alternately to tune and heldout.
A page is a pointer into ../shared/data (a trafilatura-eval page by ``file``; a WARC record or a
document by ``source`` and ``id``, or by ``record``, its position in a file without ids of its own,
whose reader ids hash the path and so move with ../shared) or, for kinds the samples lack (spam,
adult, link farms, listings, cookie walls; forum threads, recipes, match and market reports), a ``written``
page whose text is in the line. HTML is extracted with the pipeline's own ``extract`` stage (engine
auto) and each page's language is the ``langid`` stage's (lid.176), so the rules see what a run gives
them, as with ``language: auto`` after langid. The line's ``lang`` is the language as annotated.

A rule "drops" a page when it fires on it, whichever rule of the chain fires first: every rule of a
stage is tried (a rule that fired is switched off to find the next), and a stage passes on the text
it would keep (C4 rewrites it).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from bench.common.paths import ROOT, SHARED

LABELS = ROOT / "tests" / "data" / "filter_eval.jsonl"
PRESETS = ROOT / "configs" / "pipeline"
TRAFILATURA = "html/trafilatura-eval"

# How to switch off the rule behind each drop reason, per stage (None: the reason ends the stage).
_OFF: dict[str, dict[str, dict | None]] = {
    "gopher_quality": {
        "gopher_short_doc": {"min_doc_words": None},
        "gopher_long_doc": {"max_doc_words": None},
        "gopher_below_avg_threshold": {"min_avg_word_length": None},
        "gopher_above_avg_threshold": {"max_avg_word_length": None},
        "gopher_too_many_hashes": {"max_symbol_word_ratio": None},
        "gopher_too_many_ellipsis": {"max_symbol_word_ratio": None},
        "gopher_too_many_bullets": {"max_bullet_lines_ratio": None},
        "gopher_too_many_end_ellipsis": {"max_ellipsis_lines_ratio": None},
        "gopher_below_alpha_threshold": {"min_alpha_words_ratio": None},
        "gopher_enough_stop_words": {"min_stop_words": None},
    },
    "gopher_repetition": {
        "empty": None,
        "top_word": {"max_top_word_frac": None},
        "dup_para_frac": {"dup_para_frac": None},
        "dup_para_char_frac": {"dup_para_char_frac": None},
        "dup_line_frac": {"dup_line_frac": None},
        "dup_line_char_frac": {"dup_line_char_frac": None},
    },
    "c4_quality": {
        "lorem_ipsum": {"filter_lorem_ipsum": False},
        "curly_bracket": {"filter_curly_bracket": False},
        "too_few_sentences": {"min_num_sentences": -1},
    },
    "fineweb_quality": {
        "empty": None,
        "line_punct_ratio": {"line_punct_thr": 0.0},
        "short_line_ratio": {"short_line_thr": 1.0},
        "char_dup_ratio": {"char_duplicates_ratio": 1.0},
        "list_ratio": {"new_line_ratio": math.inf},
    },
}


def switch_off(stage, reason: str):
    """The stage with the rule behind ``reason`` switched off, or None when nothing can be."""
    if stage.name == "gopher_repetition" and reason.endswith(("_gram", "_n_grams")):
        n = int(reason.split("_")[1])
        key = "top_n_grams" if reason.startswith("top_") else "dup_n_grams"
        return stage.model_copy(update={key: [(m, f) for m, f in getattr(stage, key) if m != n]})
    update = _OFF.get(stage.name, {}).get(reason)
    return stage.model_copy(update=update) if update else None


def rule_hits(stages, text: str, lang: str) -> list[str]:
    """Every ``stage:reason`` that fires on the text along the chain."""
    hits = []
    for stage in stages:
        if not hasattr(stage, "decide"):  # a stage that judges whole batches (quality_classifier)
            reason = stage.process(pa.table({"text": [text]}))[1][0]
            if reason is not None:
                return hits + [f"{stage.name}:{reason}"]
            continue
        while True:
            reason, kept_text = stage.decide(text, lang)
            if reason is None:
                text = kept_text
                break
            hits.append(f"{stage.name}:{reason}")
            stage = switch_off(stage, reason)
            if stage is None:
                return hits
    return hits


# ---------------------------------------------------------------------------------------------
# The labelled pages


def _shared_texts(shared: Path) -> dict[tuple[str, str], str]:
    """(source, id) -> main text of every WARC record and document in ../shared/data, and
    ("trafilatura-eval", file) for the annotated pages, extracted as a pipeline run does."""
    from dataprep.core.config import InputConfig
    from dataprep.html.extract import Extract
    from dataprep.readers import iter_documents

    keys, rows = [], []
    paths = [
        p
        for p in sorted(shared.glob("warc/*/*"))
        if "malformed" not in str(p) and not p.name.endswith((".wat", ".wat.gz"))
    ]
    for path in paths + sorted(shared.glob("documents/*")):
        for result in iter_documents(str(path), InputConfig()):
            for row in result.kept.select(["id", "text", "html", "charset"]).to_pylist():
                keys.append((str(path.relative_to(shared)), row.pop("id")))
                rows.append(row)
    for page in sorted((shared / TRAFILATURA / "pages").glob("*.html.gz")):
        keys.append(("trafilatura-eval", page.name))
        rows.append({"text": None, "html": gzip.decompress(page.read_bytes()), "charset": None})
    schema = pa.schema([("text", pa.string()), ("html", pa.binary()), ("charset", pa.string())])
    table, _ = Extract().process(pa.Table.from_pylist(rows, schema=schema))
    return dict(zip(keys, table.column("text").to_pylist()))


def load_eval_set(shared: Path = SHARED, labels: Path = LABELS) -> list[dict]:
    """The labelled pages with their text and the language langid gives it (``run_lang``); a pointer
    that finds no text is an error, not a skip."""
    from dataprep.classify.langid import LanguageID
    from dataprep.readers.batches import hash_id

    texts = _shared_texts(shared)
    pages = []
    for line in labels.read_text(encoding="utf-8").splitlines():
        page = json.loads(line)
        if page["source"] != "written":
            if "record" in page:
                page["id"] = hash_id(str(shared / page["source"]), page["record"])
            key = (page["source"], page.get("file") or page["id"])
            if texts.get(key) is None:
                raise KeyError(f"{labels.name}: no text for {key} in {shared}")
            page["text"] = texts[key]
        pages.append(page)
    langs, _ = LanguageID().predict([page["text"] for page in pages])
    for page, lang in zip(pages, langs):
        page["run_lang"] = lang
    return pages


def page_name(page: dict) -> str:
    return page.get("file") or page.get("url") or page.get("id") or f"written:{page['category']}"


# ---------------------------------------------------------------------------------------------
# Figures


@dataclass
class PresetScore:
    name: str
    good: int = 0
    bad: int = 0
    good_kept: int = 0
    bad_kept: int = 0
    good_dropped: Counter = field(default_factory=Counter)  # rule -> good pages it fires on
    bad_caught: Counter = field(default_factory=Counter)  # rule -> bad pages it fires on
    bad_only: Counter = field(default_factory=Counter)  # rule -> bad pages no other rule catches
    examples: dict = field(default_factory=dict)  # (rule, "good"/"bad_only") -> page names

    @property
    def retention(self) -> float:
        return self.good_kept / self.good if self.good else 0.0

    def rules(self) -> list[str]:
        return sorted(set(self.good_dropped) | set(self.bad_caught), key=lambda r: (-self.good_dropped[r], r))


def load_preset(name: str) -> list:
    import yaml

    from dataprep.core.config import parse_stages

    path = PRESETS / f"{name}.yaml"
    return parse_stages(yaml.safe_load(path.read_text())["stages"], str(PRESETS))


def score(name: str, stages: list, pages: list[dict]) -> PresetScore:
    s = PresetScore(name)
    for page in pages:
        hits = rule_hits(stages, page["text"] or "", page["run_lang"])
        good = page["label"] == "good"
        s.good += good
        s.bad += not good
        if not hits:
            s.good_kept += good
            s.bad_kept += not good
        for rule in hits:
            (s.good_dropped if good else s.bad_caught)[rule] += 1
            if good:
                s.examples.setdefault((rule, "good"), []).append(page_name(page))
        if not good and len(hits) == 1:
            s.bad_only[hits[0]] += 1
            s.examples.setdefault((hits[0], "bad_only"), []).append(page_name(page))
    return s


def table(scores: list[PresetScore], examples: int = 0) -> str:
    lines = []
    for s in scores:
        lines += [
            f"## {s.name}: good kept {s.good_kept}/{s.good} ({s.retention:.3f}), bad kept {s.bad_kept}/{s.bad}",
            "",
            "| rule | good dropped | bad caught | bad only it catches |",
            "|---|---|---|---|",
        ]
        for rule in s.rules():
            lines.append(f"| {rule} | {s.good_dropped[rule]} | {s.bad_caught[rule]} | {s.bad_only[rule]} |")
            for kind in ("good", "bad_only"):
                names = s.examples.get((rule, kind), [])[:examples]
                if names:
                    lines.append(f"|   {kind}: {', '.join(names)} | | | |")
        lines.append("")
    return "\n".join(lines)


SPLITS = ("tune", "heldout", "all")


def in_split(pages: list[dict], split: str) -> list[dict]:
    return pages if split == "all" else [p for p in pages if p["split"] == split]


def summary(presets: dict[str, list], pages: list[dict]) -> str:
    """Good pages kept and bad pages kept, per preset and half."""
    lines = ["| preset | " + " | ".join(SPLITS) + " |", "|---|" + "---|" * len(SPLITS)]
    for name, stages in presets.items():
        cells = []
        for split in SPLITS:
            s = score(name, stages, in_split(pages, split))
            cells.append(f"good {s.good_kept}/{s.good} ({s.retention:.3f}), bad kept {s.bad_kept}/{s.bad}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presets", nargs="+", default=["fineweb_filters", "ccpretrain_filters"])
    parser.add_argument("--examples", type=int, default=0, help="name up to N pages behind each figure")
    parser.add_argument("--split", choices=SPLITS, default="all", help="the half the per-rule tables cover")
    args = parser.parse_args()
    pages = load_eval_set()
    kinds = Counter((p["label"], p["split"]) for p in pages)
    print(
        f"{len(pages)} labelled pages ({sum(p['source'] == 'written' for p in pages)} written for this set): "
        + ", ".join(f"{split} {kinds['good', split]} good + {kinds['bad', split]} bad" for split in SPLITS[:2])
        + "\n"
    )
    presets = {name: load_preset(name) for name in args.presets}
    print(summary(presets, pages) + "\n")
    print(f"Per rule, {args.split} pages:\n")
    print(table([score(name, stages, in_split(pages, args.split)) for name, stages in presets.items()], args.examples))
    return 0


if __name__ == "__main__":
    sys.exit(main())
