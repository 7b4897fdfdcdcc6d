"""The report of a pipeline output: its sections in order (the training run's from the packages that provide
them), written as ``report.html``, ``report.md`` and their PNGs. A section appears only when the run produced
its columns; see ``outputs`` for what is read and how much of the corpus."""

from __future__ import annotations

import os
import sys
from importlib.metadata import entry_points

from dataprep.core.errors import UsageError
from dataprep.core.run_record import record_written
from dataprep.core.stats import StageStats
from dataprep.core.storage import atomic_write_text, is_url, join_path
from dataprep.report import SECTIONS_GROUP, Section, corpus_sections, stage_sections
from dataprep.report.charts import Charts
from dataprep.report.outputs import drop_examples, find_manifests, load_stats, read_corpus_sample, source_funnel
from dataprep.report.render import render_html, render_markdown


def provided_sections(run: str, folder: str) -> list[Section | None]:
    """The sections installed packages register under ``SECTIONS_GROUP`` for a training run, by name."""
    providers = sorted(entry_points(group=SECTIONS_GROUP), key=lambda ep: ep.name)
    if not providers:
        print(
            f"dataprep report: --train-run {run} is left out: no package provides report sections "
            f"(entry-point group {SECTIONS_GROUP}). The training section comes with ccpretrain's pretrain "
            "package: reinstall ccpretrain (pip install -e .) to register it.",
            file=sys.stderr,
        )
        return []
    return [ep.load()(run, folder) for ep in providers]


def build_report(
    output_dir: str, dest: str | None = None, train_run: str | None = None, max_docs: int = 1_000_000
) -> tuple[str, str]:
    """Write ``report.html``, ``report.md`` and their PNGs into ``dest`` (default OUTPUT_DIR/report)."""
    if dest is None and is_url(output_dir):
        raise UsageError("the pipeline output is remote: give a local folder for the report with --out")
    dest = dest or os.path.join(output_dir, "report")
    doc = load_stats(output_dir)
    stats = [StageStats.from_dict(d) for d in doc.get("stages", [])]
    os.makedirs(dest, exist_ok=True)
    before = _stamps(dest)  # what the report adds or rewrites goes into the run's record
    charts = Charts(dest)
    sample, total = read_corpus_sample(join_path(output_dir, "corpus"), max_docs)
    manifests = find_manifests(output_dir)
    sections = [
        stage_sections.summary(output_dir, doc, stats, total, manifests, sample),
        stage_sections.funnel(stats, charts),
        stage_sections.redactions(stats),
        stage_sections.rules(stats, drop_examples(output_dir), charts),
        stage_sections.sources(sample, total, stats, source_funnel(output_dir)),
        stage_sections.cross_source(stats),
    ]
    if sample is not None:
        sections += [
            corpus_sections.languages(sample, charts),
            corpus_sections.distribution(
                sample,
                charts,
                "Document length",
                "lengths.png",
                ("chars", "num_tokens"),
                "characters (and tokens) per document",
                log_x=True,
            ),
            corpus_sections.distribution(
                sample,
                charts,
                "Perplexity",
                "perplexity.png",
                ("perplexity",),
                "perplexity under the n-gram model",
                log_x=True,
                category="ppl_bucket",
            ),
            corpus_sections.duplicates(sample, charts),
            corpus_sections.rehydration(sample, manifests, charts),
            corpus_sections.pii(sample),
            corpus_sections.distribution(
                sample,
                charts,
                "Toxicity",
                "toxicity.png",
                corpus_sections.TOXICITY_SCORES,
                "flagged-word fraction / classifier probability",
                totals=("toxicity_removed",),
            ),
        ]
    sections.append(corpus_sections.tokens(manifests, charts))
    if train_run:
        sections += provided_sections(train_run, dest)
    sections = [s for s in sections if s is not None]
    title = f"Pipeline report: {os.path.basename(output_dir.rstrip('/')) or output_dir}"
    html_path, md_path = os.path.join(dest, "report.html"), os.path.join(dest, "report.md")
    atomic_write_text(md_path, render_markdown(title, sections))
    atomic_write_text(html_path, render_html(title, sections))
    record_written(output_dir, [path for path, stamp in _stamps(dest).items() if before.get(path) != stamp])
    return html_path, md_path


def _stamps(folder: str) -> dict[str, int]:
    return {entry.path: entry.stat().st_mtime_ns for entry in os.scandir(folder) if entry.is_file()}
