"""The report's sections on what the cleaned corpus holds, from its sample and the token shards' manifests:
languages, distributions of scores, duplicate clusters, rehydration, PII and the token shards.

A builder returns None when the run did not produce what it shows (no such column, no manifest), so the
report holds only the sections a run has.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa

from dataprep.report import Section
from dataprep.report.cells import count, number, percent
from dataprep.report.charts import Charts

DEDUP_COLUMNS = {"dup_cluster_size": "near-duplicate (MinHash)", "exact_cluster_size": "exact duplicate"}
TOXICITY_SCORES = ("toxicity_words", "toxicity_model", "toxicity_model_max")
SIZE_BUCKETS = [(1, 1), (2, 2), (3, 3), (4, 4), (5, 9), (10, 99), (100, None)]
QUANTILES = ["", "documents", "p1", "p10", "median", "p90", "p99", "max"]


def _quantiles(label: str, values: np.ndarray) -> list[str]:
    if not len(values):
        return [label, "0"] + ["-"] * 6
    return [label, count(len(values)), *map(number, np.percentile(values, [1, 10, 50, 90, 99])), number(values.max())]


def _floats(table: pa.Table, name: str) -> np.ndarray:
    """A numeric column as float64, nulls and NaNs (documents a stage did not score) left out."""
    values = table.column(name).cast(pa.float64()).to_numpy(zero_copy_only=False)
    return values[~np.isnan(values)]


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
        [label, count(n), percent(n, len(langs)), percent(sum(text[x] for x in members), sum(text.values()))]
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
            f"{count(unscored)} of {count(sample.num_rows)} documents are not scored (no model for their language)."
        )
    for col in (c for c in totals if c in sample.column_names):
        values = _floats(sample, col)
        s.text.append(
            f"{col}: {count(values.sum())} in all, "
            f"in {count((values > 0).sum())} of {count(sample.num_rows)} documents."
        )
    if category in sample.column_names:
        labels = Counter(sample.column(category).to_pylist())
        rows = [[str(k or "(none)"), count(n), percent(n, sample.num_rows)] for k, n in labels.most_common()]
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
        rows = [[label, count(len(b)), count((b - 1).sum())] for label, b in zip(labels, buckets)]
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
    rows = [[number(w), count(n), count(int(((w - 1) * tokens[weights == w]).sum()))] for w, n in zip(values, counts)]
    s = Section(
        "Rehydration", ["Each kept document is written to the shards as many times as its duplicate cluster's weight."]
    )
    added = [m["tokens"] - m["unique_tokens"] for _, m in manifests if isinstance(m, dict) and "unique_tokens" in m]
    if added:
        s.text.append(f"Copies add {count(sum(added))} tokens to the shards' unique tokens.")
    s.images.append(
        charts.barh("sample_weights.png", [number(w) for w in values], counts, "documents by sample weight")
    )
    s.tables.append((["sample weight", "documents", "tokens their copies add"], rows))
    return s


def pii(sample: pa.Table) -> Section | None:
    columns = [c for c in sample.column_names if c.startswith("pii_") and c != "pii_count"]
    if not columns or not sample.num_rows:
        return None
    rows = []
    for col in columns + ["pii_count"] * ("pii_count" in sample.column_names):
        counts = _floats(sample, col)
        found = int((counts > 0).sum())
        label = "all types" if col == "pii_count" else col.removeprefix("pii_")
        rows.append([label, count(counts.sum()), count(found), percent(found, sample.num_rows)])
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
            f"{folder}: {count(m['tokens'])} tokens, {count(m['documents'])} documents in {len(per_shard)} shards "
            "(vocabulary "
            f"{count(m['vocab_size'])}, {m['dtype']}, tokenizer sha256 {m['tokenizer'].get('model_sha256', '?')[:12]})."
        )
        if 0 < len(per_shard) <= 60:
            s.images.append(
                charts.barh(f"tokens_{i}.png", [sh["name"] for sh in m["shards"]], per_shard, "tokens per shard")
            )
        elif per_shard:
            s.images.append(charts.hist(f"tokens_{i}.png", {"shards": np.array(per_shard, float)}, "tokens per shard"))
        rows = [[sh["name"], count(sh["documents"]), count(sh["tokens"])] for sh in m["shards"][:listed]]
        rows += [[f"... {len(per_shard) - listed} more", "", ""]] * (len(per_shard) > listed)
        s.tables.append((["shard", "documents", "tokens"], rows + [["all", count(m["documents"]), count(m["tokens"])]]))
    return s
