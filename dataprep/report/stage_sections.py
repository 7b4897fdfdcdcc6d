"""The report's sections on what the stages did, from the run's stats: the summary, the removal funnel, removal
per rule, redactions, duplicates removed across sources, and the funnel per source kind.

A builder returns None when the run did not produce what it shows (no stages, no such counter), so the
report holds only the sections a run has.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from dataprep.core.stats import StageStats
from dataprep.report import Section
from dataprep.report.cells import byte_size, count, percent
from dataprep.report.charts import Charts


def summary(output_dir: str, doc: dict, stats: list[StageStats], total: int, manifests, sample) -> Section:
    first, last = (stats[0], stats[-1]) if stats else (StageStats("-"), StageStats("-"))
    rows = [
        ["pipeline output", output_dir],
        ["input files", count(doc.get("input_files", 0))],
        ["stages", " → ".join(st.stage for st in stats) or "-"],
        [f"records into {first.stage}", count(first.docs_in)],
        ["documents kept", f"{count(last.docs_kept)} ({percent(last.docs_kept, first.docs_in)})"],
        ["text kept", byte_size(last.bytes_kept)],
        ["errors (isolated and counted)", count(sum(st.errors for st in stats))],
        ["stage time (summed over tasks)", f"{sum(st.seconds for st in stats):,.1f} s"],
    ]
    tokens = sum(m["tokens"] for _, m in manifests if isinstance(m, dict))
    if tokens:
        rows.append(["tokens in shards", count(tokens)])
    s = Section("Summary", tables=[([], rows)])
    if sample is None:
        s.text.append("corpus/ is missing: the distributions of the cleaned documents are left out.")
    elif sample.num_rows < total:
        s.text.append(
            f"Distributions below are over {count(sample.num_rows)} of the {count(total)} cleaned documents "
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
                f"; {count(sum(skipped.values()))} records that are no documents were skipped apart: "
                + ", ".join(f"{kind} {count(n)}" for kind, n in skipped.items())
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
            ax.text(st.docs_in, i, f" {percent(st.docs_kept, st.docs_in)} kept", va="center", fontsize=8)
        ax.set_yticks(list(y), [st.stage for st in stats])
        ax.invert_yaxis()
        ax.set(xlim=(0, max(st.docs_in for st in stats) * 1.2 or 1), xlabel="documents")
        ax.legend(loc="lower right")
    s.images.append("funnel.png")
    rows = [
        [
            st.stage,
            count(st.docs_in),
            count(st.docs_kept),
            count(st.docs_dropped),
            percent(st.docs_dropped, st.docs_in),
            count(st.errors),
            byte_size(st.bytes_in),
            byte_size(st.bytes_kept),
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
        [st.stage, event.split(":", 1)[1], event.split(":", 1)[0], count(n)]
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
                f"{count(total)} secrets and pieces of personal data replaced by placeholders in kept "
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
                    count(n),
                    percent(n, st.docs_in),
                    byte_size(st.dropped_bytes.get(reason, 0)),
                    "\n".join(examples.get((st.stage, reason), [])),
                ]
            )
        if len(st.dropped) > per_stage:
            rest = sum(n for _, n in st.dropped.most_common()[per_stage:])
            rows.append(
                [
                    st.stage,
                    f"({len(st.dropped) - per_stage} other rules)",
                    count(rest),
                    percent(rest, st.docs_in),
                    "",
                    "",
                ]
            )
    s.tables.append((["stage", "rule", "docs", "% of stage input", "text", "examples"], rows))
    return s


def cross_source(stats: list[StageStats]) -> Section | None:
    """Duplicates removed per pair of sources (dedup stages with a ``priority`` list)."""
    rows = [
        [st.stage, *key.removeprefix("cross_source:").split("->", 1), count(n)]
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
            rows.append(
                [k] + [cell for n, all_n in zip(counts, whole.values()) for cell in (count(n), percent(n, all_n))]
            )
        s.tables.append((header, rows))
        if sample.num_rows < total:
            s.text.append(f"Kept documents: over {count(sample.num_rows)} of the {count(total)} (the report's sample).")
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
                        count(current),
                        count(current - out),
                        count(out),
                        percent(out, current),
                        ", ".join(f"{r} {count(n)}" for r, n in sorted(reasons.items(), key=lambda x: -x[1])),
                    ]
                )
                current -= out
        s.tables.append((["source kind", "stage", "docs in", "kept", "dropped", "% dropped", "rules"], rows))
    return s
