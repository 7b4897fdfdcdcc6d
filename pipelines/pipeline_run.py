"""One run of a pipeline config: plan the steps, run or skip each, gather stats, write the corpus.

Each step writes Parquet under ``OUTPUT/steps/NN_name/`` and then a ``_STEP_DONE.json`` marker holding
its stats and a fingerprint of the config that produced it. A rerun skips every step whose marker
matches; in the first one that does not (a crash leaves no marker), a step keeps the tasks a
previous run finished with the same fingerprint and runs the rest (``pipelines.tasks``). A global
step first decides over the whole corpus and saves that decision, then applies it in tasks like any
other step's; a rerun keeps a saved decision too (``pipelines.global_step``). So a killed job resumes
without losing or duplicating documents, and ``stats.json`` says per step how many tasks were reused.
The cleaned corpus lands in ``OUTPUT/corpus/``.

A step whose stage errors exceed the config's ``error_budget`` fails: no marker, its first tracebacks
printed and saved to ``steps/NN_name/_ERRORS.json``; rerunning after the fix resumes at that step,
redoing its tasks that had errors. A stage failing on most documents stops its step early (both:
``pipelines.fail_fast``).
Model files a stage names are shipped with the job to cluster executors (``pipelines.steps.ship_assets``).
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from dataclasses import dataclass

from dataprep.core.config import PipelineConfig
from dataprep.core.errors import UsageError, WorkFailed
from dataprep.core.inputs import check_output_outside_inputs, expand_inputs
from dataprep.core.run_record import record_written
from dataprep.core.stage import DROP_REASON, DROP_STAGE
from dataprep.core.stats import StageStats, format_table, merge_all, save_json
from dataprep.core.storage import atomic_write_text, join_path
from dataprep.readers import READ_STAGE, expand_code_inputs
from pipelines import global_step
from pipelines.fail_fast import check_budget
from pipelines.fused_step import run_fused_step
from pipelines.input_changes import describe_changes, input_state
from pipelines.interrupt import check_interrupted, interruptible
from pipelines.run_folder import check_dataset_folder, claim_output
from pipelines.steps import Step, plan_steps, ship_assets
from pipelines.tasks import DONE_MARKER, fingerprint_of, read_marker, write_step_marker

log = logging.getLogger("ccpretrain")


class NoReadableInput(WorkFailed):
    """No input file held a readable record: the run fails instead of writing an empty corpus."""


class NothingKept(WorkFailed):
    """A stage dropped every document it was given: the run fails, after its stats and table, instead of
    ending in a later stage's puzzling error or an empty corpus."""


@dataclass
class RunResult:
    output_dir: str
    corpus_dir: str
    stats: list[StageStats]
    files: int
    skipped_steps: int
    steps: list[dict]  # per step: skipped, tasks, tasks_reused


class PipelineRun:
    """One execution of a config: plans the steps, runs or skips each, gathers stats."""

    def __init__(self, config: PipelineConfig, spark=None, force: bool = False, overwrite: bool = False):
        self.config = config
        self.out = config.output.dir
        self.force = force
        self.overwrite = overwrite
        self._spark = spark
        self.steps = plan_steps(config.stages)
        for stage in config.stages:
            stage.place_outputs(self.out)

    @property
    def spark(self):
        if self._spark is None:
            from pipelines.spark import get_spark

            sc = self.config.spark
            self._spark = get_spark(sc.master, sc.app_name, sc.conf)
            context = self._spark.sparkContext
            if not context.master.startswith("local") and not context.getCheckpointDir():
                # dedup checkpoints its graphs; on executors' local disks a lost executor would fail the step
                context.setCheckpointDir(join_path(self.out, "_checkpoints"))
        return self._spark

    def run(self) -> RunResult:
        """Run the steps; Ctrl-C ends it with KeyboardInterrupt, keeping what finished (``interruptible``)."""
        with interruptible():
            return self._run()

    def _run(self) -> RunResult:
        cfg = self.config
        files = self._input_files()
        claim_output(cfg, self.steps, files, self.overwrite)
        print(f"dataprep: {len(files)} input files, {len(self.steps)} steps -> {self.out}", flush=True)
        ship_assets(self.spark, self.config.stages)
        state = input_state(files)  # a file changed since a step read it: that step and the ones after are redone
        fingerprint = fingerprint_of({"files": files, "input": cfg.input.model_dump(mode="json"), "state": state})
        all_stats: list[StageStats] = []
        steps_done: list[dict] = []  # per step: its tasks and how many a previous run had finished
        skipped = 0
        previous_dir = None
        redo = self.force
        for step in self.steps:
            check_interrupted()
            fingerprint = fingerprint_of([fingerprint, step.fingerprint()])
            step_dir = join_path(self.out, "steps", step.name)
            marker = None if redo else read_marker(join_path(step_dir, DONE_MARKER))
            if marker and step.reads_input and (changes := describe_changes(marker.get("inputs", {}), state)):
                print(f"step {step.name}: {changes}; reading them again", flush=True)
            if marker and marker.get("fingerprint") == fingerprint:
                print(f"step {step.name}: already done, skipping", flush=True)
                skipped += 1
                stats = [StageStats.from_dict(d) for d in marker["stats"]]
                tasks = marker.get("tasks")
                steps_done.append({"step": step.name, "skipped": True, "tasks": tasks, "tasks_reused": tasks})
            else:
                redo = True  # later steps run too, keeping the tasks (and decisions) a previous run finished
                print(f"step {step.name}: running", flush=True)
                t0 = time.perf_counter()
                stats, tasks = self._run_step(step, step_dir, files, previous_dir, fingerprint)
                wall = time.perf_counter() - t0
                if step.reads_input:  # before the budget: all input unreadable is the one thing to say
                    check_input_read(stats, len(files))
                check_budget(self.spark, step.name, step_dir, stats, cfg.error_budget)
                write_step_marker(step_dir, fingerprint, wall, tasks, stats, state if step.reads_input else None)
                steps_done.append({"step": step.name, "skipped": False, **tasks})
                print(f"step {step.name}: done in {wall:.1f}s", flush=True)
            all_stats.extend(stats)
            previous_dir = step_dir
            emptied = next((s for s in stats if not s.docs_kept and (s.docs_in or s.stage == READ_STAGE)), None)
            if emptied:
                self._save_stats(all_stats, len(files), steps_done, None)
                raise NothingKept(nothing_kept(emptied, self.out))
        check_interrupted()
        corpus_dir = join_path(self.out, "corpus")
        self._write_corpus(previous_dir, corpus_dir, fingerprint, redo)
        all_stats = self._save_stats(all_stats, len(files), steps_done, corpus_dir)
        record_written(self.out, [path for stage in cfg.stages for path in stage.files_written()])
        print(f"cleaned corpus: {corpus_dir}\nstats: {join_path(self.out, 'stats.json')}", flush=True)
        return RunResult(self.out, corpus_dir, all_stats, len(files), skipped, steps_done)

    def _save_stats(
        self, stats: list[StageStats], files: int, steps_done: list[dict], corpus_dir: str | None
    ) -> list[StageStats]:
        """Write ``stats.json`` and print the per-stage table (the funnel); return the merged stats."""
        stats = merge_all(stats)
        save_json(
            stats,
            join_path(self.out, "stats.json"),
            {
                "input_files": files,
                "cores": self.spark.sparkContext.defaultParallelism,
                "corpus": corpus_dir,
                "steps": steps_done,
            },
        )
        print(format_table(stats), flush=True)
        return stats

    def _input_files(self) -> list[str]:
        cfg = self.config
        if not cfg.input.paths:
            raise UsageError("no input: set input.paths in the config or pass --input")
        expand = expand_code_inputs if cfg.input.format == "code" else expand_inputs  # code: folders are inputs
        files = expand(cfg.input.paths)
        check_output_outside_inputs(self.out, cfg.input.paths)
        return files

    # -- steps ---------------------------------------------------------------------------------

    def _kept(self, step_dir: str):
        from pyspark.sql import functions as F

        df = self.spark.read.parquet(join_path(step_dir, "data"))
        return df.where(F.col(DROP_REASON).isNull()).drop(DROP_STAGE, DROP_REASON)

    def _run_step(
        self, step: Step, step_dir: str, files: list[str], previous_dir: str | None, fingerprint: str
    ) -> tuple[list[StageStats], dict]:
        if step.is_global:
            return global_step.run_global_step(self, step, step_dir, previous_dir, fingerprint)
        return self._run_fused(step, step_dir, files, previous_dir, fingerprint)

    def _run_fused(
        self,
        step: Step,
        step_dir: str,
        files: list[str],
        previous_dir: str | None,
        fingerprint: str,
        stages: list | None = None,
        decisions: str | None = None,
    ) -> tuple[list[StageStats], dict]:
        """A fused step's tasks (``pipelines.fused_step``); a run over stored signals runs its first step's
        tasks over them instead."""
        return run_fused_step(self, step, step_dir, files, previous_dir, fingerprint, stages, decisions)

    def _prepare(self, step: Step, step_dir: str, previous_dir: str, fingerprint: str, prepare) -> tuple:
        """A global step's per-document rows (``pipelines.global_step.prepare``); a run over stored signals reads
        them instead."""
        return global_step.prepare(self, step, step_dir, previous_dir, fingerprint, prepare)

    def _write_corpus(self, last_dir: str, corpus_dir: str, fingerprint: str, redo: bool) -> None:
        marker = join_path(corpus_dir, DONE_MARKER)
        done = read_marker(marker)
        if not redo and done and done.get("fingerprint") == fingerprint:
            return
        df = self._corpus_frame(self._kept(last_dir))
        check_dataset_folder(corpus_dir)
        self._write(df, corpus_dir)
        atomic_write_text(marker, json.dumps({"fingerprint": fingerprint}))

    def _write(self, df, path: str) -> None:
        compression = self.config.output.compression
        df.write.mode("overwrite").option("compression", "none" if compression == "none" else compression).parquet(path)

    @staticmethod
    def _corpus_frame(df):
        """The kept documents as the corpus holds them (working columns left out)."""
        return df.drop(*[c for c in ("_bytes", "html") if c in df.columns])


def check_input_read(stats: list[StageStats], files: int) -> None:
    """Fail when no input file yielded a single readable record (every one empty, damaged or
    unreadable): an empty corpus with exit 0 would hide a wrong path or a broken download. Input
    that reads but holds no document (only metadata records, say) fails after its stats (``NothingKept``)."""
    read = next((s for s in stats if s.stage == READ_STAGE), None)
    if read is None:
        return
    if read.counters.get("empty_files"):
        log.warning("%d input files are empty", read.counters["empty_files"])
    if not (read.docs_kept or read.records_skipped or any(not r.startswith("error:") for r in read.dropped)):
        causes = Counter({reason.removeprefix("error:"): n for reason, n in read.dropped.items()})
        causes["empty"] += read.counters.get("empty_files", 0)
        first = f"; first: {read.errors_seen.samples[0]['message']}" if read.errors_seen.samples else ""
        raise NoReadableInput(
            f"no readable input in {files} file{'s' * (files != 1)}: "
            f"{', '.join(f'{n} {c}' for c, n in causes.most_common() if n)}{first}. "
            "Check input.paths (--input) and input.format"
        )


def nothing_kept(stage: StageStats, out: str) -> str:
    """Why the run stops with nothing kept: no document in the input, or the stage that dropped them all."""
    reasons = ", ".join(f"{n} {reason}" for reason, n in Counter(stage.dropped).most_common(3))
    if not stage.docs_in:
        return (
            f"the input holds no documents ({sum(stage.records_skipped.values())} records read, none of them a "
            "document): check "
            f"input.paths and input.format; per-stage counts: {join_path(out, 'stats.json')}"
        )
    return (
        f"stage {stage.stage} dropped all {stage.docs_in} documents it was given ({reasons or 'no reason recorded'}), "
        f"so the run stops there with nothing kept; per-stage counts: {join_path(out, 'stats.json')}"
    )


def run_pipeline(config: PipelineConfig, spark=None, force: bool = False, overwrite: bool = False) -> RunResult:
    return PipelineRun(config, spark=spark, force=force, overwrite=overwrite).run()
