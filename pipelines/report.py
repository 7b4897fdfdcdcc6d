"""``dataprep report OUTPUT_DIR``: what a pipeline run did, as an HTML page with PNG charts and a
Markdown summary (``report.html``, ``report.md``), plus the training curves of a run when given one.

Counts (the removal funnel per stage and per rule) come from ``stats.json`` and are exact. Distributions
(languages, lengths, perplexity, duplicates, PII, toxicity) are read from ``corpus/`` a few columns at
a time, over at most ``--max-docs`` documents taken file by file in a fixed random order, so a large
corpus is never read whole. A section appears only when the run produced its columns.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import random
import string
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataprep.io import atomic_output, atomic_write_text, exists, is_url, read_text
from dataprep.stage import DROP_REASON, DROP_STAGE
from dataprep.stats import StageStats
from dataprep.units import human
from dataprep.tokenize.manifest import MANIFEST_NAME, join_path, load_manifest
from pipelines.steps import STATS_MARK

CATEGORIES = ("lang", "ppl_bucket")  # string columns worth counting; other strings are ids
DEDUP_COLUMNS = {"dup_cluster_size": "near-duplicate (MinHash)", "exact_cluster_size": "exact duplicate"}
TOXICITY_SCORES = ("toxicity_words", "toxicity_model", "toxicity_model_max")
SIZE_BUCKETS = [(1, 1), (2, 2), (3, 3), (4, 4), (5, 9), (10, 99), (100, None)]
QUANTILES = ["", "documents", "p1", "p10", "median", "p90", "p99", "max"]


@dataclass
class Section:
    """One titled part of the report, rendered to both HTML and Markdown. A table with no headers is a
    list of (key, value) rows."""

    title: str
    text: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)  # PNG names inside the report folder
    tables: list[tuple[list[str], list[list[str]]]] = field(default_factory=list)


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


class Charts:
    """One matplotlib figure per PNG in the report folder (Agg backend: no display needed)."""

    def __init__(self, folder: str):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        self.folder, self.plt = folder, plt

    @contextmanager
    def figure(self, name: str, height: float = 3.6):
        fig, ax = self.plt.subplots(figsize=(9, height))
        yield ax
        ax.grid(alpha=0.3)
        fig.tight_layout()
        with atomic_output(os.path.join(self.folder, name)) as tmp:
            fig.savefig(tmp, format="png", dpi=100)
        self.plt.close(fig)

    def hist(self, name: str, series: dict[str, np.ndarray], xlabel: str, log_x: bool = False) -> str | None:
        series = {k: v[v > 0] if log_x else v for k, v in series.items()}
        series = {k: v for k, v in series.items() if len(v)}
        if not series:
            return None
        values = np.concatenate(list(series.values()))
        lo, hi = values.min(), max(values.max(), values.min() * 1.01 if log_x else values.min() + 1)
        with self.figure(name) as ax:
            for label, v in series.items():
                ax.hist(v, bins=np.geomspace(lo, hi, 40) if log_x else np.linspace(lo, hi, 40), alpha=0.6, label=label)
            ax.set(xlabel=xlabel, ylabel="documents", xscale="log" if log_x else "linear")
            if len(series) > 1:
                ax.legend()
        return name

    def barh(self, name: str, labels: list[str], values: list, xlabel: str, colors=None, log: bool = False) -> str:
        with self.figure(name, height=1.2 + 0.28 * len(labels)) as ax:
            ax.barh(range(len(labels)), values, color=colors, log=log)
            ax.set_yticks(range(len(labels)), labels, fontsize=8)
            ax.invert_yaxis()
            ax.set_xlabel(xlabel)
            if log:
                ax.set_xlim(left=0.5)  # bars of 1 stay visible
        return name


# -- inputs ------------------------------------------------------------------------------------


def load_stats(output_dir: str) -> dict:
    path = join_path(output_dir, "stats.json")
    if not exists(path):
        raise FileNotFoundError(f"{path} not found: {output_dir} is not the output of a finished `dataprep run`")
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None


def _dataset(path: str):
    """A Parquet dataset of a local folder or fsspec URL (Spark's _SUCCESS and markers are ignored)."""
    import fsspec
    import pyarrow.dataset as ds

    fs, local = fsspec.core.url_to_fs(path)
    return ds.dataset(local, format="parquet", filesystem=fs if is_url(path) else None)


def read_corpus(corpus_dir: str, max_docs: int) -> tuple[pa.Table | None, int]:
    """Numeric columns, ``lang``, ``ppl_bucket`` and ``chars`` (text length) of at most ``max_docs``
    documents, whole files in a fixed random order; and the corpus's document count."""
    if not exists(corpus_dir):
        return None, 0
    dataset = _dataset(corpus_dir)
    names = [f.name for f in dataset.schema
             if f.name in CATEGORIES or pa.types.is_integer(f.type) or pa.types.is_floating(f.type)]
    has_text = "text" in dataset.schema.names
    fragments = list(dataset.get_fragments())
    random.Random(0).shuffle(fragments)
    tables, n = [], 0
    for batch in (b for f in fragments for b in f.to_batches(columns=names + ["text"] * has_text)):
        if n >= max_docs:
            break
        table = pa.Table.from_batches([batch]).slice(0, max_docs - n)
        if has_text:
            chars = pc.fill_null(pc.utf8_length(table.column("text")), 0).cast(pa.int64())
            table = table.drop_columns(["text"]).append_column("chars", chars)
        tables.append(table)
        n += table.num_rows
    sample = pa.concat_tables(tables, promote_options="permissive") if tables else dataset.schema.empty_table().select(names)
    return sample, dataset.count_rows()


def drop_examples(output_dir: str, per_reason: int = 3, max_rows: int = 1_000_000) -> dict[tuple, list[str]]:
    """Up to ``per_reason`` URLs of dropped documents per (stage, reason), scanning each step's data."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(join_path(output_dir, "steps"))
    examples: dict[tuple, list[str]] = {}
    for data in sorted(fs.glob(f"{root.rstrip('/')}/*/data")):
        dataset = _dataset(fs.unstrip_protocol(data) if is_url(output_dir) else data)
        if not {DROP_STAGE, DROP_REASON, "url"} <= set(dataset.schema.names):
            continue
        dropped = pc.field(DROP_REASON).is_valid() & (pc.field(DROP_STAGE) != STATS_MARK)
        seen = 0
        for batch in dataset.to_batches(columns=[DROP_STAGE, DROP_REASON, "url"], filter=dropped):
            for stage, reason, url in zip(*(batch.column(i).to_pylist() for i in range(3))):
                urls = examples.setdefault((stage, reason), [])
                if url and len(urls) < per_reason:
                    urls.append(url)
            seen += batch.num_rows
            if seen >= max_rows:
                break
    return examples


def find_manifests(output_dir: str) -> list[tuple[str, dict | str]]:
    """Every token-shard manifest under the output: (folder, manifest), or (folder, error message)."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(output_dir)
    found = []
    for path in sorted(fs.glob(f"{root.rstrip('/')}/**/{MANIFEST_NAME}")):
        folder = fs.unstrip_protocol(os.path.dirname(path)) if is_url(output_dir) else os.path.dirname(path)
        try:
            found.append((folder, load_manifest(folder)))
        except (ValueError, FileNotFoundError) as exc:
            found.append((folder, str(exc)))
    return found


# -- sections ----------------------------------------------------------------------------------


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
        s.text.append(f"Distributions below are over {_n(sample.num_rows)} of the {_n(total)} cleaned documents "
                      "(whole files in a fixed random order; raise --max-docs for more).")
    return s


def funnel(stats: list[StageStats], charts: Charts) -> Section | None:
    if not stats:
        return None
    s = Section("Removal funnel per stage", ["Each stage gets what the previous one kept."])
    if stats[0].stage == "read":
        s.text.append("'read' counts every input record: WARC requests, metadata and non-HTML responses included.")

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
    rows = [[st.stage, _n(st.docs_in), _n(st.docs_kept), _n(st.docs_dropped), _pct(st.docs_dropped, st.docs_in),
             _n(st.errors), _bytes(st.bytes_in), _bytes(st.bytes_kept), f"{st.seconds:,.1f}"] for st in stats]
    s.tables.append((["stage", "docs in", "kept", "dropped", "% dropped", "errors", "text in", "text kept", "seconds"], rows))
    return s


def rules(stats: list[StageStats], examples: dict, charts: Charts, top: int = 20, per_stage: int = 15) -> Section | None:
    reasons = [(st, reason, n) for st in stats for reason, n in st.dropped.most_common()]
    if not reasons:
        return None
    s = Section("Removal per rule", ["Documents each rule removed, the share of its stage's input, and example URLs."])
    color = {st.stage: f"C{i % 10}" for i, st in enumerate(stats)}
    biggest = sorted(reasons, key=lambda r: -r[2])[:top]
    s.images.append(charts.barh("rules.png", [f"{st.stage}: {r}" for st, r, _ in biggest], [n for *_, n in biggest],
                                f"documents removed (top {len(biggest)} rules)", [color[st.stage] for st, *_ in biggest]))
    rows = []
    for st in stats:  # the table lists each stage's biggest rules; langid alone has one per language
        for reason, n in st.dropped.most_common(per_stage):
            rows.append([st.stage, reason, _n(n), _pct(n, st.docs_in), _bytes(st.dropped_bytes.get(reason, 0)),
                         "\n".join(u[:100] for u in examples.get((st.stage, reason), []))])
        if len(st.dropped) > per_stage:
            rest = sum(n for _, n in st.dropped.most_common()[per_stage:])
            rows.append([st.stage, f"({len(st.dropped) - per_stage} other rules)", _n(rest), _pct(rest, st.docs_in), "", ""])
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
    rows = [[label, _n(n), _pct(n, len(langs)), _pct(sum(text[x] for x in members), sum(text.values()))]
            for (label, members), n in zip(groups, counts)]
    s = Section("Languages", images=[charts.barh("languages.png", [label for label, _ in groups], counts, "documents")])
    s.tables.append((["language", "documents", "share of documents", "share of text"], rows))
    if "lang_score" in sample.column_names:
        s.tables.append((QUANTILES, [_quantiles("language score", _floats(sample, "lang_score"))]))
    return s


def distribution(sample: pa.Table, charts: Charts, title: str, png: str, columns: tuple, xlabel: str,
                 log_x: bool = False, category: str | None = None, totals: tuple = ()) -> Section | None:
    """A histogram and quantiles of score columns, counts of a label column, sums of count columns."""
    series = {c: _floats(sample, c) for c in columns if c in sample.column_names}
    if not series or not sample.num_rows:
        return None
    s = Section(title, images=[charts.hist(png, series, xlabel, log_x)])
    s.tables.append((QUANTILES, [_quantiles(c, v) for c, v in series.items()]))
    unscored = sample.num_rows - min(len(v) for v in series.values())
    if unscored:
        s.text.append(f"{_n(unscored)} of {_n(sample.num_rows)} documents are not scored (no model for their language).")
    for col in (c for c in totals if c in sample.column_names):
        values = _floats(sample, col)
        s.text.append(f"{col}: {_n(values.sum())} in all, in {_n((values > 0).sum())} of {_n(sample.num_rows)} documents.")
    if category in sample.column_names:
        labels = Counter(sample.column(category).to_pylist())
        rows = [[str(k or "(none)"), _n(n), _pct(n, sample.num_rows)] for k, n in labels.most_common()]
        s.tables.append(([category, "documents", "share"], rows))
    return s


def duplicates(sample: pa.Table, charts: Charts) -> Section | None:
    present = [c for c in DEDUP_COLUMNS if c in sample.column_names]
    if not present or not sample.num_rows:
        return None
    s = Section("Duplicate clusters", ["Each kept document stands for its cluster: itself and the duplicates removed with it."])
    for col in present:
        sizes = _floats(sample, col).astype(np.int64)
        buckets = [sizes[(sizes >= lo) & (sizes <= (hi or sizes.max(initial=lo)))] for lo, hi in SIZE_BUCKETS]
        labels = [str(lo) if lo == hi else f"{lo}-{hi}" if hi else f"{lo}+" for lo, hi in SIZE_BUCKETS]
        rows = [[label, _n(len(b)), _n((b - 1).sum())] for label, b in zip(labels, buckets)]
        s.images.append(charts.barh(f"{col.removesuffix('_cluster_size')}_clusters.png", labels, [len(b) for b in buckets],
                                    f"{DEDUP_COLUMNS[col]} clusters by size (log scale)", log=True))
        s.tables.append(([f"{DEDUP_COLUMNS[col]} cluster size", "clusters", "duplicates they stand for"], rows))
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
        rows.append([label, _n(counts.sum()), _n(found), _pct(found, sample.num_rows)])
    return Section("PII", ["Spans found per type (replaced by placeholders unless the stage only counted)."],
                   tables=[(["type", "spans", "documents with any", "share of documents"], rows)])


def tokens(manifests: list, charts: Charts, listed: int = 30) -> Section | None:
    if not manifests:
        return None
    s = Section("Token shards")
    for i, (folder, m) in enumerate(manifests):
        if not isinstance(m, dict):
            s.text.append(f"{folder}: unreadable manifest: {m}")
            continue
        per_shard = [sh["tokens"] for sh in m["shards"]]
        s.text.append(f"{folder}: {_n(m['tokens'])} tokens, {_n(m['documents'])} documents in {len(per_shard)} shards (vocabulary "
                      f"{_n(m['vocab_size'])}, {m['dtype']}, tokenizer sha256 {m['tokenizer'].get('model_sha256', '?')[:12]}).")
        if 0 < len(per_shard) <= 60:
            s.images.append(charts.barh(f"tokens_{i}.png", [sh["name"] for sh in m["shards"]], per_shard, "tokens per shard"))
        elif per_shard:
            s.images.append(charts.hist(f"tokens_{i}.png", {"shards": np.array(per_shard, float)}, "tokens per shard"))
        rows = [[sh["name"], _n(sh["documents"]), _n(sh["tokens"])] for sh in m["shards"][:listed]]
        rows += [[f"... {len(per_shard) - listed} more", "", ""]] * (len(per_shard) > listed)
        s.tables.append((["shard", "documents", "tokens"], rows + [["all", _n(m["documents"]), _n(m["tokens"])]]))
    return s


def training(run: str, charts: Charts) -> Section:
    """Loss and throughput of a training run, drawn by ``pretrain plot``'s code."""
    from pretrain.metrics import read_metrics
    from pretrain.plot import plot

    path = run if os.path.isfile(run) else os.path.join(run, "metrics.jsonl")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path} not found: give a training run folder or its metrics JSONL")
    image = os.path.basename(plot(path, os.path.join(charts.folder, "training.png")))  # ValueError if no train records
    records = read_metrics(path)
    train = [r for r in records if r.get("kind", "train") == "train" and "loss" in r]
    val = [r for r in records if r.get("kind") == "val" and "val_loss" in r]
    rows = [["metrics", path], ["steps logged", f"{_n(len(train))} (last step {_n(train[-1]['step'])})"],
            ["train loss first → last", f"{train[0]['loss']:.4f} → {train[-1]['loss']:.4f}"]]
    if "tokens" in train[-1]:
        rows.append(["tokens trained", _n(train[-1]["tokens"])])
    if val:
        best = min(val, key=lambda r: r["val_loss"])
        rows.append(["validation loss last / best", f"{val[-1]['val_loss']:.4f} / {best['val_loss']:.4f} (step {_n(best['step'])})"])
    for key, label, scale, unit in (("tokens_per_s", "tokens/s", 1, ""), ("mfu", "MFU", 100, "%")):
        values = [r[key] for r in train if key in r]
        if values:
            rows.append([f"{label} (median)", f"{scale * np.median(values):,.1f}{unit}"])
    return Section("Training", images=[image], tables=[([], rows)])


# -- rendering ---------------------------------------------------------------------------------


def _md(v) -> str:
    """Markdown renderers pass HTML tags through: neutralise them (crawled URLs can hold anything)."""
    return str(v).replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|").replace("\n", " ")


def render_markdown(title: str, sections: list[Section]) -> str:
    lines = [f"# {title}", ""]
    for s in sections:
        lines += [f"## {s.title}", ""] + [x for p in s.text for x in (_md(p), "")]
        for headers, rows in s.tables:
            if not headers:
                lines += [f"- **{_md(k)}**: {_md(v)}" for k, v in rows]
            else:
                lines += ["| " + " | ".join(map(_md, headers)) + " |", "|" + "---|" * len(headers)]
                lines += ["| " + " | ".join(map(_md, row)) + " |" for row in rows]
            lines.append("")
        lines += [x for img in s.images if img for x in (f"![{s.title}]({img})", "")]
    return "\n".join(lines)


PAGE = string.Template("""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>$title</title>
<style>
body { font-family: system-ui, sans-serif; max-width: 1000px; margin: 2em auto; padding: 0 1em; color: #222; }
h1 { border-bottom: 2px solid #444; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
nav a { margin-right: 1em; } table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; } td { max-width: 420px; overflow-wrap: anywhere; }
img { max-width: 100%; display: block; margin: 1em 0; }
</style></head>
<body><h1>$title</h1>
<nav>$nav</nav>
$body
</body></html>
""")


def _html_table(headers: list[str], rows: list[list[str]]) -> str:
    def cell(v, tag="td"):
        return f"<{tag}>{html.escape(str(v)).replace(chr(10), '<br>')}</{tag}>"

    head = "<tr>" + "".join(cell(h, "th") for h in headers) + "</tr>" if headers else ""
    key = "td" if headers else "th"  # a key-value table (no headers) shows its keys as row headers
    body = "".join("<tr>" + cell(row[0], key) + "".join(map(cell, row[1:])) + "</tr>" for row in rows)
    return f"<table>{head}{body}</table>"


def render_html(title: str, sections: list[Section]) -> str:
    nav, body = [], []
    for i, s in enumerate(sections):
        nav.append(f'<a href="#s{i}">{html.escape(s.title)}</a>')
        body.append(f'<section id="s{i}"><h2>{html.escape(s.title)}</h2>')
        body += [f"<p>{html.escape(p)}</p>" for p in s.text]
        body += [f'<img src="{html.escape(img)}" alt="{html.escape(s.title)}">' for img in s.images if img]
        body += [_html_table(h, r) for h, r in s.tables] + ["</section>"]
    return PAGE.substitute(title=html.escape(title), nav="".join(nav), body="\n".join(body))


# -- command -----------------------------------------------------------------------------------


def build_report(output_dir: str, dest: str | None = None, train_run: str | None = None,
                 max_docs: int = 1_000_000) -> tuple[str, str]:
    """Write ``report.html``, ``report.md`` and their PNGs into ``dest`` (default OUTPUT_DIR/report)."""
    if dest is None and is_url(output_dir):
        raise ValueError("the pipeline output is remote: give a local folder for the report with --out")
    dest = dest or os.path.join(output_dir, "report")
    doc = load_stats(output_dir)
    stats = [StageStats.from_dict(d) for d in doc.get("stages", [])]
    os.makedirs(dest, exist_ok=True)
    charts = Charts(dest)
    sample, total = read_corpus(join_path(output_dir, "corpus"), max_docs)
    manifests = find_manifests(output_dir)
    sections = [summary(output_dir, doc, stats, total, manifests, sample), funnel(stats, charts),
                rules(stats, drop_examples(output_dir), charts)]
    if sample is not None:
        sections += [
            languages(sample, charts),
            distribution(sample, charts, "Document length", "lengths.png", ("chars", "num_tokens"),
                         "characters (and tokens) per document", log_x=True),
            distribution(sample, charts, "Perplexity", "perplexity.png", ("perplexity",), "perplexity under the n-gram model",
                         log_x=True, category="ppl_bucket"),
            duplicates(sample, charts),
            pii(sample),
            distribution(sample, charts, "Toxicity", "toxicity.png", TOXICITY_SCORES,
                         "flagged-word fraction / classifier probability", totals=("toxicity_removed",)),
        ]
    sections += [tokens(manifests, charts), training(train_run, charts) if train_run else None]
    sections = [s for s in sections if s is not None]
    title = f"Pipeline report: {os.path.basename(output_dir.rstrip('/')) or output_dir}"
    html_path, md_path = os.path.join(dest, "report.html"), os.path.join(dest, "report.md")
    atomic_write_text(md_path, render_markdown(title, sections))
    atomic_write_text(html_path, render_html(title, sections))
    return html_path, md_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("output_dir", help="a `dataprep run` output folder (holding stats.json, steps/, corpus/)")
    parser.add_argument("--train-run", metavar="RUN_DIR", help="a training run folder (or its metrics JSONL): adds its curves")
    parser.add_argument("--out", metavar="DIR", help="where to write the report (default: OUTPUT_DIR/report)")
    parser.add_argument("--max-docs", type=int, default=1_000_000,
                        help="documents read for the distributions (default: %(default)s)")


def main(args: argparse.Namespace) -> int:
    if args.max_docs <= 0:
        raise ValueError("--max-docs must be positive")
    html_path, md_path = build_report(args.output_dir, args.out, args.train_run, args.max_docs)
    print(f"report: {html_path}\nsummary: {md_path}")
    return 0
