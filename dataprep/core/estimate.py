"""What a whole crawl will cost, projected from a sample run's ``stats.json``: core-hours per stage,
wall time on N cores, documents kept, output and shuffle sizes.

The sample is the cost model: its stages' CPU seconds per page already hold the crawl's routing rate
(pages sent to the fallback extractor), its drop rates and its page sizes, so the projection is the
sample times the number of pages, stage by stage. ``ASSUMPTIONS`` lists what that takes for granted;
the estimate prints it beside its figures.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass

from dataprep.core.errors import UsageError
from dataprep.core.stats import StageStats
from dataprep.readers import READ_STAGE

# Bytes one document puts through each dedup stage's shuffle: exact dedup shuffles one hash and one
# id per document; MinHash one (band, hash, id) row per band. Measured by bench/pipeline/bench_scale_curve.py
# with the default 14 bands (docs/scale.md); other stages do not shuffle.
SHUFFLE_BYTES_PER_DOC = {"exact_dedup": 60, "minhash_dedup": 480}
ROUTED_COUNTER = "routed_to_trafilatura"

ASSUMPTIONS = [
    "per-document stages cost a fixed part per Python worker (loading lists and models: the CPU of each task's first "
    "batch beyond the stage's cost per document, over the sample's workers) plus CPU seconds per document (task wall "
    "seconds where a stats.json predates CPU seconds); the fixed part is paid once per core of the crawl "
    "(each core's Python worker is reused for its tasks)",
    "whole-corpus steps (dedup, tokenize) cost the CPU seconds of their Spark tasks (the JVM's task metrics and "
    "the Python workers'; wall time times the sample's cores where a stats.json predates them): a fixed part, paid "
    "once whatever the size (per Spark stage its costliest task, which started the stage; per Python function call "
    "what it cost before its documents), plus the rest, growing linearly with documents (more data, more tasks); "
    "a sample whose few tasks each hold many documents counts some of them as fixed, and reads low",
    "the sample is representative: the crawl routes as many pages to the fallback extractor, drops as many and "
    "has pages as large as the sample did",
    "the dedup shuffle is a floor: MinHash's bytes per document grew with the corpus (more near-copies per original)",
    "duplicates grow with the crawl: a sample finds fewer cross-document duplicates than the whole crawl, so "
    "kept documents and output size are upper bounds",
    "wall time = core-hours / cores, but never less than one input file's task (a file is not split)",
    "core-hours count the stages' own work; Spark's (Parquet writes, moving batches to Python workers, the driver "
    "planning jobs) comes on top",
]
ONE_SAMPLE = (
    "one sample whose stats.json predates the fixed cost of whole-corpus steps (their Spark tasks' own cost): "
    "it counts as if it grew with documents, which overestimates from small samples; rerun the sample, or give "
    "two samples of different sizes to separate them"
)


@dataclass
class StageEstimate:
    stage: str
    whole_corpus: bool  # a global step (dedup, tokenize) rather than a per-document stage
    docs_in: int
    docs_kept: int
    core_hours: float
    core_ms_per_page: float  # in the sample


@dataclass
class Estimate:
    pages: int
    sample_pages: int
    cores: int
    sample_cores: int
    basis: str  # "cpu": per-document stages' CPU seconds; "wall": their task seconds (older stats.json)
    stages: list[StageEstimate]
    core_hours: float
    wall_hours: float
    routed_fraction: float | None
    output_bytes: int
    shuffle_bytes: int
    assumptions: list[str]

    def to_dict(self) -> dict:
        return asdict(self)


def sample_pages(stats: list[StageStats]) -> int:
    """Pages the sample's reader handed to the stages (records that are not pages are not counted)."""
    read = next((s for s in stats if s.stage == READ_STAGE), None)
    if read is None:
        raise UsageError(f"the stats have no {READ_STAGE!r} stage: give the stats.json of a `dataprep run`")
    first = next((s for s in stats if s.stage != READ_STAGE), None)
    pages = first.docs_in if first is not None else read.docs_kept
    if pages <= 0:
        raise UsageError("the sample run read no documents: run the config on a sample that holds pages first")
    return pages


@dataclass
class Sample:
    """One sample run: its merged stats, the cores it ran on and its first step's tasks."""

    stats: list[StageStats]
    cores: int
    tasks: int | None = None

    @property
    def workers(self) -> int:
        """Python workers that loaded the stages' lists and models: one per core, fewer with fewer tasks."""
        return min(self.cores, self.tasks or self.cores)

    @property
    def pages(self) -> int:
        return sample_pages(self.stats)

    def core_seconds(self, global_stages: set[str], cpu: bool) -> dict[str, float]:
        """Per stage, the core-seconds it took: CPU (or task) seconds of a per-document stage; a
        whole-corpus step's executor CPU seconds (its wall time times the sample's cores in older stats)."""
        return {
            s.stage: _global_seconds(s, self.cores)
            if s.stage in global_stages
            else (s.cpu_seconds if cpu else s.seconds)
            for s in self.stats
        }


def _global_seconds(s: StageStats, cores: int) -> float:
    """A whole-corpus step's core-seconds: its decision's executor CPU plus its tasks' CPU applying it
    (older stats: the step's executor CPU alone, or its wall time times the cores)."""
    return s.executor_cpu_seconds + s.cpu_seconds if s.executor_cpu_seconds else s.seconds * cores


def worker_fixed_cost(s: StageStats) -> tuple[float, float] | None:
    """(fixed CPU seconds of the sample's workers, CPU seconds per document) of a per-document stage: the
    cost per document from the batches after each task's first, the fixed cost what the first batches
    took beyond it. None without first-batch figures or later batches to measure against."""
    later_docs = s.docs_in - s.first_batch_docs
    if not s.first_batch_docs or later_docs <= 0 or not s.cpu_seconds:
        return None
    per_doc = (s.cpu_seconds - s.first_batch_cpu_seconds) / later_docs
    fixed = s.first_batch_cpu_seconds - per_doc * s.first_batch_docs
    return (fixed, per_doc) if fixed > 0 else (0.0, s.cpu_seconds / s.docs_in)


def task_fixed_cost(s: StageStats, pages: int) -> tuple[float, float] | None:
    """(fixed core-seconds, core-seconds per page) of a whole-corpus step: the cost of its decision's Spark
    tasks that does not grow with documents apart, the rest of its executor CPU and its tasks' CPU applying
    the decision per page. None where the stats.json predates the fixed cost."""
    if not s.executor_fixed_cpu_seconds or not s.executor_cpu_seconds:
        return None
    fixed = min(s.executor_fixed_cpu_seconds, s.executor_cpu_seconds)
    return fixed, (s.executor_cpu_seconds - fixed + s.cpu_seconds) / pages


def _fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """(fixed core-seconds, core-seconds per page) through the smallest and the largest sample; one
    sample (or a cost that does not grow) gives a line through the origin."""
    (p1, c1), (p2, c2) = min(points), max(points)
    if p2 > p1 and c2 > c1:
        slope = (c2 - c1) / (p2 - p1)
        return max(0.0, c2 - slope * p2), slope
    return 0.0, c2 / p2


def estimate(
    samples: list[Sample], pages: int, cores: int, global_stages: set[str], pages_per_file: float | None = None
) -> Estimate:
    """Project sample runs onto ``pages`` pages run on ``cores`` cores. A per-document stage: its
    workers' fixed cost (``worker_fixed_cost``) once per core, plus its cost per page. A whole-corpus
    step: its Spark tasks' own cost once (``task_fixed_cost``), plus its cost per page. Stats without
    these figures: one sample gives the cost per page; several samples of different sizes a fixed cost
    plus a cost per page, fitted through the smallest and largest. The largest sample gives the funnel,
    sizes and routing rate. ``global_stages`` names the stages that ran as whole-corpus steps."""
    if pages <= 0:
        raise UsageError(f"pages must be positive, not {pages}")
    if cores <= 0 or any(s.cores <= 0 for s in samples):
        raise UsageError("cores and sample cores must be positive")
    main = max(samples, key=lambda s: s.pages)
    stats, base = main.stats, main.pages
    scale = pages / base
    cpu = all(any(s.cpu_seconds for s in sample.stats if s.stage not in global_stages) for sample in samples)
    costs = [(sample.pages, sample.core_seconds(global_stages, cpu)) for sample in samples]
    rows = []
    for s in stats:
        whole = s.stage in global_stages
        split = task_fixed_cost(s, base) if whole else worker_fixed_cost(s) if cpu else None
        if split and not whole:  # a fixed cost per Python worker, paid once per core of the crawl
            fixed, per_page = split[0] * cores / main.workers, split[1] * s.docs_in / base
        elif split:  # the Spark tasks' own cost, paid once whatever the size
            fixed, per_page = split
        else:
            fixed, per_page = _fit([(p, c.get(s.stage, 0.0)) for p, c in costs])
        rows.append(
            StageEstimate(
                s.stage,
                s.stage in global_stages,
                round(s.docs_in * scale),
                round(s.docs_kept * scale),
                (fixed + per_page * pages) / 3600,
                1000 * per_page,
            )
        )
    core_hours = sum(r.core_hours for r in rows)
    wall = core_hours / cores
    if pages_per_file:  # one file is one task: the first step lasts at least as long as one file's task
        per_page = sum(r.core_ms_per_page for r in rows if not r.whole_corpus) / 1000
        wall = max(wall, per_page * pages_per_file / 3600)
    extract = next((s for s in stats if s.stage == "extract"), None)
    routed = extract.counters.get(ROUTED_COUNTER, 0) / extract.docs_in if extract and extract.docs_in else None
    shuffle = sum(SHUFFLE_BYTES_PER_DOC.get(r.stage, 0) * r.docs_in for r in rows)
    unsplit = any(s.stage in global_stages and not s.executor_fixed_cpu_seconds for s in stats)
    assumptions = list(ASSUMPTIONS) + ([ONE_SAMPLE] if unsplit and len({s.pages for s in samples}) == 1 else [])
    return Estimate(
        pages,
        base,
        cores,
        main.cores,
        "cpu" if cpu else "wall",
        rows,
        core_hours,
        wall,
        routed,
        round(stats[-1].bytes_kept * scale),
        shuffle,
        assumptions,
    )


def format_estimate(est: Estimate) -> str:
    from dataprep.core.units import human

    lines = [
        f"projected from a sample of {est.sample_pages:,} pages (x{est.pages / est.sample_pages:,.1f}) to "
        f"{est.pages:,} pages",
        f"{'stage':<22}{'docs in':>16}{'kept':>16}{'core-h':>12}{'core ms/page':>14}",
    ]
    for r in est.stages:
        mark = " *" if r.whole_corpus else ""
        lines.append(
            f"{r.stage + mark:<22}{r.docs_in:>16,}{r.docs_kept:>16,}{r.core_hours:>12,.1f}{r.core_ms_per_page:>14.3f}"
        )
    lines.append(f"{'total':<22}{'':>32}{est.core_hours:>12,.1f}")
    lines.append(
        "  * a whole-corpus step: the CPU seconds of its Spark tasks"
        + (
            ""
            if est.basis == "cpu"
            else "; other stages: task wall seconds (the sample's stats.json has no CPU seconds)"
        )
    )
    days = est.wall_hours / 24
    lines.append(
        f"wall time on {est.cores:,} cores: {est.wall_hours:,.1f} h" + (f" ({days:,.1f} days)" if days >= 2 else "")
    )
    lines.append(
        f"output: about {human(est.output_bytes, 'B')} kept (text, and HTML where the corpus keeps it); "
        f"dedup shuffle: about {human(est.shuffle_bytes, 'B')}"
    )
    if est.routed_fraction is not None:
        lines.append(f"pages routed to the fallback extractor in the sample: {est.routed_fraction:.1%}")
    lines.append("assumptions:")
    lines.extend(f"  - {a}" for a in est.assumptions)
    return "\n".join(lines)


def pages_from_files(files: int, pages_per_file: float) -> int:
    if files <= 0 or pages_per_file <= 0:
        raise UsageError("the listing holds no files, or the sample holds no pages per file")
    return math.ceil(files * pages_per_file)


def global_stage_names(stats: list[StageStats]) -> set[str]:
    """The stages of a run that are whole-corpus steps (the rest are costed per document)."""
    from dataprep.core.registry import MissingDependency, stage_class
    from dataprep.core.stage import GlobalStage

    names = set()
    for s in stats:
        try:
            if issubclass(stage_class(s.stage), GlobalStage):
                names.add(s.stage)
        except (KeyError, MissingDependency):
            continue  # the reader, or a stage this install cannot load: counted as per-document
    return names


def load_sample(path: str, sample_cores: int | None) -> tuple[Sample, int | None]:
    """A sample run from its output folder (or its stats.json), and how many input files it read."""
    from dataprep.report.outputs import load_stats

    folder = os.path.dirname(path) if path.endswith(".json") else path
    doc = load_stats(folder)
    stats = [StageStats.from_dict(d) for d in doc.get("stages", [])]
    if not stats:
        raise UsageError(f"{folder}/stats.json holds no stages: the sample run did not finish")
    cores = sample_cores or doc.get("cores")
    if not cores:
        raise UsageError(f"{folder}/stats.json does not say how many cores the run had: give --sample-cores")
    steps = doc.get("steps") or [{}]
    return Sample(stats, int(cores), steps[0].get("tasks")), doc.get("input_files")
