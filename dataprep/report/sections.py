"""The report's data sections, each built from the run's stats or its corpus sample, with its charts.

A builder returns None when the run did not produce what it shows (no stages, no such column, no
manifest), so the report holds only the sections a run has.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataprep.core.stats import StageStats
from dataprep.core.units import human
from dataprep.report import Section
from dataprep.report.charts import Charts

DEDUP_COLUMNS = {"dup_cluster_size": "near-duplicate (MinHash)", "exact_cluster_size": "exact duplicate"}
TOXICITY_SCORES = ("toxicity_words", "toxicity_model", "toxicity_model_max")
SIZE_BUCKETS = [(1, 1), (2, 2), (3, 3), (4, 4), (5, 9), (10, 99), (100, None)]
QUANTILES = ["", "documents", "p1", "p10", "median", "p90", "p99", "max"]


def _n(v) -> str:
    return f"{int(v):,}"


def _pct(part, whole) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def _bytes(v) -> str:
    return human(v, "B")


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def _quantiles(label: str, values: np.ndarray) -> list[str]:
    if not len(values):
        return [label, "0"] + ["-"] * 6
    return [label, _n(len(values)), *map(_num, np.percentile(values, [1, 10, 50, 90, 99])), _num(values.max())]


def _floats(table: pa.Table, name: str) -> np.ndarray:
    """A numeric column as float64, nulls and NaNs (documents a stage did not score) left out."""
    values = table.column(name).cast(pa.float64()).to_numpy(zero_copy_only=False)
    return values[~np.isnan(values)]


def summary(output_dir: str, doc: dict, stats: list[StageStats], total: int, manifests, sample) -> Section:
    first, last = (stats[0], stats[-1]) if stats else (StageStats("-"), StageStats("-"))
    rows = [
        ["pipeline output", output_dir],
        ["input files", _n(doc.get("input_files", 0))],
        ["stages", " → ".join(st.stage for st in stats) or "-"],
        [f"records into {first.stage}", _n(first.docs_in)],
        ["documents kept", f"{_n(last.docs_kept)} ({_pct(last.docs_kept, first.docs_in)})"],
        ["text kept", _bytes(last.bytes_kept)],
        ["errors (isolated and counted)", _n(sum(st.errors for st in stats))],
        ["stage time (summed over tasks)", f"{sum(st.seconds for st in stats):,.1f} s"],
    ]
    tokens = sum(m["tokens"] for _, m in manifests if isinstance(m, dict))
    if tokens:
        rows.append(["tokens in shards", _n(tokens)])
    s = Section("Summary", tables=[([], rows)])
    if sample is None:
        s.text.append("corpus/ is missing: the distributions of the cleaned documents are left out.")
    elif sample.num_rows < total:
        s.text.append(
            f"Distributions below are over {_n(sample.num_rows)} of the {_n(total)} cleaned documents "
            "(whole files in a fixed random order; raise --max-docs for more)."
        )
    return s


def funnel(stats: list[StageStats], charts: Charts) -> Section | None:
    if not stats:
        return None
    s = Section("Removal funnel per stage", ["Each stage gets what the previous one kept."])
    if stats[0].stage == "read":
        skipped = stats[0].records_skipped
        s.text.append(
            "'read' counts the documents of the input (non-HTML responses, redirects and revisits dropped among them)"
            + (
                f"; {_n(sum(skipped.values()))} records that are no documents were skipped apart: "
                + ", ".join(f"{kind} {_n(n)}" for kind, n in skipped.items())
                if skipped
                else ""
            )
            + "."
        )

    with charts.figure("funnel.png", height=1.2 + 0.4 * len(stats)) as ax:
        y, kept = range(len(stats)), [st.docs_kept for st in stats]
        ax.barh(y, kept, color="tab:green", label="kept")
        ax.barh(y, [st.docs_dropped for st in stats], left=kept, color="tab:red", label="dropped")
        for i, st in enumerate(stats):
            ax.text(st.docs_in, i, f" {_pct(st.docs_kept, st.docs_in)} kept", va="center", fontsize=8)
        ax.set_yticks(list(y), [st.stage for st in stats])
        ax.invert_yaxis()
        ax.set(xlim=(0, max(st.docs_in for st in stats) * 1.2 or 1), xlabel="documents")
        ax.legend(loc="lower right")
    s.images.append("funnel.png")
    rows = [
        [
            st.stage,
            _n(st.docs_in),
            _n(st.docs_kept),
            _n(st.docs_dropped),
            _pct(st.docs_dropped, st.docs_in),
            _n(st.errors),
            _bytes(st.bytes_in),
            _bytes(st.bytes_kept),
            f"{st.seconds:,.1f}",
        ]
        for st in stats
    ]
    s.tables.append(
        (["stage", "docs in", "kept", "dropped", "% dropped", "errors", "text in", "text kept", "seconds"], rows)
    )
    return s


def redactions(stats: list[StageStats]) -> Section | None:
    """What the pii and code_secrets stages replaced with placeholders (or only found, with redact: false)."""
    rows = [
        [st.stage, event.split(":", 1)[1], event.split(":", 1)[0], _n(n)]
        for st in stats
        for event, n in sorted(st.counters.items())
        if event.startswith(("redacted:", "found:"))
    ]
    if not rows:
        return None
    total = sum(n for st in stats for event, n in st.counters.items() if event.startswith("redacted:"))
    return Section(
        "Redactions",
        [
            (
                f"{_n(total)} secrets and pieces of personal data replaced by placeholders in kept "
                "documents (found: counted only, the stage ran with redact: false)."
            )
        ],
        tables=[(["stage", "type", "action", "count"], rows)],
    )


def rules(
    stats: list[StageStats], examples: dict, charts: Charts, top: int = 20, per_stage: int = 15
) -> Section | None:
    reasons = [(st, reason, n) for st in stats for reason, n in st.dropped.most_common()]
    if not reasons:
        return None
    s = Section(
        "Removal per rule",
        [
            "Documents each rule removed, the share of its stage's input, and examples of what "
            "it removed: URL and the start of the text (the text only when the run set "
            "output.write_dropped), personal data and secrets replaced by placeholders. What each quality "
            "preset costs on labelled pages: "
            "bench/quality/filter_eval.py."
        ],
    )
    color = {st.stage: f"C{i % 10}" for i, st in enumerate(stats)}
    biggest = sorted(reasons, key=lambda r: -r[2])[:top]
    s.images.append(
        charts.barh(
            "rules.png",
            [f"{st.stage}: {r}" for st, r, _ in biggest],
            [n for *_, n in biggest],
            f"documents removed (top {len(biggest)} rules)",
            [color[st.stage] for st, *_ in biggest],
        )
    )
    rows = []
    for st in stats:  # the table lists each stage's biggest rules; langid alone has one per language
        for reason, n in st.dropped.most_common(per_stage):
            rows.append(
                [
                    st.stage,
                    reason,
                    _n(n),
                    _pct(n, st.docs_in),
                    _bytes(st.dropped_bytes.get(reason, 0)),
                    "\n".join(examples.get((st.stage, reason), [])),
                ]
            )
        if len(st.dropped) > per_stage:
            rest = sum(n for _, n in st.dropped.most_common()[per_stage:])
            rows.append(
                [st.stage, f"({len(st.dropped) - per_stage} other rules)", _n(rest), _pct(rest, st.docs_in), "", ""]
            )
    s.tables.append((["stage", "rule", "docs", "% of stage input", "text", "examples"], rows))
    return s


def languages(sample: pa.Table, charts: Charts, top: int = 20) -> Section | None:
    if "lang" not in sample.column_names or not sample.num_rows:
        return None
    langs = sample.column("lang").to_pylist()
    chars = sample.column("chars").to_pylist() if "chars" in sample.column_names else [0] * len(langs)
    docs, text = Counter(langs), Counter()
    for lang, c in zip(langs, chars):
        text[lang] += c
    groups = [(str(lang), [lang]) for lang, _ in docs.most_common(top)]
    if len(docs) > top:
        groups.append((f"({len(docs) - top} others)", [lang for lang, _ in docs.most_common()[top:]]))
    counts = [sum(docs[x] for x in members) for _, members in groups]
    rows = [
        [label, _n(n), _pct(n, len(langs)), _pct(sum(text[x] for x in members), sum(text.values()))]
        for (label, members), n in zip(groups, counts)
    ]
    s = Section("Languages", images=[charts.barh("languages.png", [label for label, _ in groups], counts, "documents")])
    s.tables.append((["language", "documents", "share of documents", "share of text"], rows))
    if "lang_score" in sample.column_names:
        s.tables.append((QUANTILES, [_quantiles("language score", _floats(sample, "lang_score"))]))
    return s


def distribution(
    sample: pa.Table,
    charts: Charts,
    title: str,
    png: str,
    columns: tuple,
    xlabel: str,
    log_x: bool = False,
    category: str | None = None,
    totals: tuple = (),
) -> Section | None:
    """A histogram and quantiles of score columns, counts of a label column, sums of count columns."""
    series = {c: _floats(sample, c) for c in columns if c in sample.column_names}
    if not series or not sample.num_rows:
        return None
    s = Section(title, images=[charts.hist(png, series, xlabel, log_x)])
    s.tables.append((QUANTILES, [_quantiles(c, v) for c, v in series.items()]))
    unscored = sample.num_rows - min(len(v) for v in series.values())
    if unscored:
        s.text.append(
            f"{_n(unscored)} of {_n(sample.num_rows)} documents are not scored (no model for their language)."
        )
    for col in (c for c in totals if c in sample.column_names):
        values = _floats(sample, col)
        s.text.append(
            f"{col}: {_n(values.sum())} in all, in {_n((values > 0).sum())} of {_n(sample.num_rows)} documents."
        )
    if category in sample.column_names:
        labels = Counter(sample.column(category).to_pylist())
        rows = [[str(k or "(none)"), _n(n), _pct(n, sample.num_rows)] for k, n in labels.most_common()]
        s.tables.append(([category, "documents", "share"], rows))
    return s


def duplicates(sample: pa.Table, charts: Charts) -> Section | None:
    present = [c for c in DEDUP_COLUMNS if c in sample.column_names]
    if not present or not sample.num_rows:
        return None
    s = Section(
        "Duplicate clusters", ["Each kept document stands for its cluster: itself and the duplicates removed with it."]
    )
    for col in present:
        sizes = _floats(sample, col).astype(np.int64)
        buckets = [sizes[(sizes >= lo) & (sizes <= (hi or sizes.max(initial=lo)))] for lo, hi in SIZE_BUCKETS]
        labels = [str(lo) if lo == hi else f"{lo}-{hi}" if hi else f"{lo}+" for lo, hi in SIZE_BUCKETS]
        rows = [[label, _n(len(b)), _n((b - 1).sum())] for label, b in zip(labels, buckets)]
        s.images.append(
            charts.barh(
                f"{col.removesuffix('_cluster_size')}_clusters.png",
                labels,
                [len(b) for b in buckets],
                f"{DEDUP_COLUMNS[col]} clusters by size (log scale)",
                log=True,
            )
        )
        s.tables.append(([f"{DEDUP_COLUMNS[col]} cluster size", "clusters", "duplicates they stand for"], rows))
    return s


def rehydration(sample: pa.Table, manifests: list, charts: Charts) -> Section | None:
    """Documents per sample weight (``minhash_dedup: sample_weights``) and the tokens their copies add."""
    if "sample_weight" not in sample.column_names or not sample.num_rows:
        return None
    weights = _floats(sample, "sample_weight")
    tokens = _floats(sample, "num_tokens") if "num_tokens" in sample.column_names else np.zeros(len(weights))
    values = sorted(set(weights.tolist()))
    counts = [int((weights == w).sum()) for w in values]
    rows = [[_num(w), _n(n), _n(int(((w - 1) * tokens[weights == w]).sum()))] for w, n in zip(values, counts)]
    s = Section(
        "Rehydration", ["Each kept document is written to the shards as many times as its duplicate cluster's weight."]
    )
    added = [m["tokens"] - m["unique_tokens"] for _, m in manifests if isinstance(m, dict) and "unique_tokens" in m]
    if added:
        s.text.append(f"Copies add {_n(sum(added))} tokens to the shards' unique tokens.")
    s.images.append(charts.barh("sample_weights.png", [_num(w) for w in values], counts, "documents by sample weight"))
    s.tables.append((["sample weight", "documents", "tokens their copies add"], rows))
    return s


def cross_source(stats: list[StageStats]) -> Section | None:
    """Duplicates removed per pair of sources (dedup stages with a ``priority`` list)."""
    rows = [
        [st.stage, *key.removeprefix("cross_source:").split("->", 1), _n(n)]
        for st in stats
        for key, n in sorted(st.counters.items())
        if key.startswith("cross_source:")
    ]
    if not rows:
        return None
    return Section(
        "Duplicates across sources",
        ["Each duplicate removed, by its source and the source of the copy kept (the stage's priority list)."],
        tables=[(["stage", "copy removed from", "copy kept from", "documents"], rows)],
    )


def pii(sample: pa.Table) -> Section | None:
    columns = [c for c in sample.column_names if c.startswith("pii_") and c != "pii_count"]
    if not columns or not sample.num_rows:
        return None
    rows = []
    for col in columns + ["pii_count"] * ("pii_count" in sample.column_names):
        counts = _floats(sample, col)
        found = int((counts > 0).sum())
        label = "all types" if col == "pii_count" else col.removeprefix("pii_")
        rows.append([label, _n(counts.sum()), _n(found), _pct(found, sample.num_rows)])
    return Section(
        "PII",
        ["Spans found per type (replaced by placeholders unless the stage only counted)."],
        tables=[(["type", "spans", "documents with any", "share of documents"], rows)],
    )


def tokens(manifests: list, charts: Charts, listed: int = 30) -> Section | None:
    if not manifests:
        return None
    s = Section("Token shards")
    for i, (folder, m) in enumerate(manifests):
        if not isinstance(m, dict):
            s.text.append(f"{folder}: unreadable manifest: {m}")
            continue
        per_shard = [sh["tokens"] for sh in m["shards"]]
        s.text.append(
            f"{folder}: {_n(m['tokens'])} tokens, {_n(m['documents'])} documents in {len(per_shard)} shards "
            "(vocabulary "
            f"{_n(m['vocab_size'])}, {m['dtype']}, tokenizer sha256 {m['tokenizer'].get('model_sha256', '?')[:12]})."
        )
        if 0 < len(per_shard) <= 60:
            s.images.append(
                charts.barh(f"tokens_{i}.png", [sh["name"] for sh in m["shards"]], per_shard, "tokens per shard")
            )
        elif per_shard:
            s.images.append(charts.hist(f"tokens_{i}.png", {"shards": np.array(per_shard, float)}, "tokens per shard"))
        rows = [[sh["name"], _n(sh["documents"]), _n(sh["tokens"])] for sh in m["shards"][:listed]]
        rows += [[f"... {len(per_shard) - listed} more", "", ""]] * (len(per_shard) > listed)
        s.tables.append((["shard", "documents", "tokens"], rows + [["all", _n(m["documents"]), _n(m["tokens"])]]))
    return s


def sources(
    sample: pa.Table | None, total: int, stats: list[StageStats], funnel_counts: tuple[dict, dict] | None
) -> Section | None:
    """Documents, text and tokens per source kind, and the funnel per source kind; only for a corpus that
    is not web pages alone."""
    kept = {}
    if sample is not None and "source_kind" in sample.column_names and sample.num_rows:
        columns = [c for c in ("chars", "num_tokens") if c in sample.column_names]
        table = sample.select(columns).append_column("kind", pc.fill_null(sample.column("source_kind"), "web"))
        for row in table.group_by("kind").aggregate([([], "count_all")] + [(c, "sum") for c in columns]).to_pylist():
            kept[row["kind"]] = row
    kinds = sorted(set(funnel_counts[0] if funnel_counts else ()) | set(kept))
    if not kinds or kinds == ["web"]:
        return None
    s = Section(
        "Sources",
        [
            "Kept documents by the kind of source they came from (column source_kind), then the "
            "removal funnel per source kind (exact counts from each step's data)."
        ],
    )
    if kept:
        header, rows = ["source kind", "documents", "share"], []
        for c, label in (("chars", "text (characters)"), ("num_tokens", "tokens")):
            header += [label, f"share of {label.split()[0]}"] * (c in columns)
        whole = {key: sum(r[key] or 0 for r in kept.values()) for key in ["count_all"] + [f"{c}_sum" for c in columns]}
        for k in kinds:
            row = kept.get(k, {})
            counts = [row.get(key) or 0 for key in whole]
            rows.append([k] + [cell for n, all_n in zip(counts, whole.values()) for cell in (_n(n), _pct(n, all_n))])
        s.tables.append((header, rows))
        if sample.num_rows < total:
            s.text.append(f"Kept documents: over {_n(sample.num_rows)} of the {_n(total)} (the report's sample).")
    if funnel_counts:
        into, dropped = funnel_counts
        rows = []
        for k in kinds:
            current = into.get(k, 0)
            for st in stats:
                reasons = {r: n for (kind, stage, r), n in dropped.items() if kind == k and stage == st.stage}
                out = sum(reasons.values())
                rows.append(
                    [
                        k,
                        st.stage,
                        _n(current),
                        _n(current - out),
                        _n(out),
                        _pct(out, current),
                        ", ".join(f"{r} {_n(n)}" for r, n in sorted(reasons.items(), key=lambda x: -x[1])),
                    ]
                )
                current -= out
        s.tables.append((["source kind", "stage", "docs in", "kept", "dropped", "% dropped", "rules"], rows))
    return s
