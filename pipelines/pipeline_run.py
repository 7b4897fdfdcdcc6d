"""One run of a pipeline config: plan the steps, run or skip each, gather stats, write the corpus.

Each step writes Parquet under ``OUTPUT/steps/NN_name/`` and then a ``_STEP_DONE.json`` marker holding
its stats and a fingerprint of the config that produced it. A rerun skips every step whose marker
matches; in the first one that does not (a crash leaves no marker), a step keeps the tasks a
previous run finished with the same fingerprint and runs the rest (``pipelines.tasks``). A global
step first decides over the whole corpus (``pipelines.global_runners``) and saves that decision, then
applies it in tasks like any other step's; a rerun keeps a saved decision too. So a killed job resumes
without losing or duplicating documents, and ``stats.json`` says per step how many tasks were reused.
The cleaned corpus lands in ``OUTPUT/corpus/``.

A step whose stage errors exceed the config's ``error_budget`` fails: no marker, its first tracebacks
printed and saved to ``steps/NN_name/_ERRORS.json``; rerunning after the fix resumes at that step,
redoing its tasks that had errors. A stage failing on most documents stops its step early
(``pipelines.fail_fast``).
Model files a stage names are shipped with the job to cluster executors (``addFile``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass

from dataprep.core.applier import AppliedStage
from dataprep.core.config import PipelineConfig
from dataprep.core.errors import UsageError, WorkFailed
from dataprep.core.provenance import code_version, listing, now, sha256_json
from dataprep.core.run_record import record_written
from dataprep.core.runner import fused_schema
from dataprep.core.stage import DROP_REASON, DROP_STAGE
from dataprep.core.stats import (
    ErrorBudgetExceeded,
    StageStats,
    describe_errors,
    format_table,
    merge_all,
    over_budget,
    save_json,
)
from dataprep.core.storage import (
    atomic_write_text,
    check_output_outside_inputs,
    exists,
    expand_inputs,
    is_url,
    join_path,
    read_text,
    remove_tree,
)
from dataprep.readers import READ_STAGE, expand_code_inputs, read_schema
from pipelines.fail_fast import ErrorWatch
from pipelines.input_changes import describe_changes, input_state
from pipelines.interrupt import check_interrupted, interruptible
from pipelines.progress import Progress, executor_fixed_cpu_seconds, executor_seconds, python_cpu
from pipelines.run_folder import check_dataset_folder, claim
from pipelines.steps import Step, StepContext, file_tasks, make_partition_fn, make_prepare_fn, plan_steps
from pipelines.tasks import (
    DATA_DIR,
    PART,
    merged_stats,
    parquet_parts,
    read_markers,
    remove_failed,
    remove_others,
    reusable,
    task_key,
    write_empty,
)

log = logging.getLogger("ccpretrain")
DONE_MARKER = "_STEP_DONE.json"
DECIDED_MARKER = "_DECIDED.json"  # a global step's decision over the whole corpus, made
DECISIONS_DIR = "_decisions"  # its decision rows, split by part of the previous step
PREPARED_DIR = "_prepared"  # the per-document rows its decision starts from (MinHash signatures), per task
ERRORS_FILE = "_ERRORS.json"


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


def _fingerprint(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _read_marker(path: str) -> dict | None:
    try:
        return json.loads(read_text(path)) if exists(path) else None
    except (OSError, ValueError):
        return None


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
        self._claim_output(files)
        print(f"dataprep: {len(files)} input files, {len(self.steps)} steps -> {self.out}", flush=True)
        self._ship_assets()
        state = input_state(files)  # a file changed since a step read it: that step and the ones after are redone
        fingerprint = _fingerprint({"files": files, "input": cfg.input.model_dump(mode="json"), "state": state})
        all_stats: list[StageStats] = []
        steps_done: list[dict] = []  # per step: its tasks and how many a previous run had finished
        skipped = 0
        previous_dir = None
        redo = self.force
        for step in self.steps:
            check_interrupted()
            fingerprint = _fingerprint([fingerprint, step.fingerprint()])
            step_dir = join_path(self.out, "steps", step.name)
            marker = None if redo else _read_marker(join_path(step_dir, DONE_MARKER))
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
                    self._check_input_read(stats, len(files))
                self._check_errors(step, step_dir, stats)
                atomic_write_text(
                    join_path(step_dir, DONE_MARKER),
                    json.dumps(
                        {
                            "fingerprint": fingerprint,
                            "wall_seconds": wall,
                            **tasks,
                            "stats": [s.to_dict() for s in stats],
                            **({"inputs": state} if step.reads_input else {}),
                        },
                        indent=1,
                    ),
                )
                steps_done.append({"step": step.name, "skipped": False, **tasks})
                print(f"step {step.name}: done in {wall:.1f}s", flush=True)
            all_stats.extend(stats)
            previous_dir = step_dir
            emptied = next((s for s in stats if not s.docs_kept and (s.docs_in or s.stage == READ_STAGE)), None)
            if emptied:
                self._save_stats(all_stats, len(files), steps_done, None)
                raise NothingKept(self._nothing_kept(emptied))
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

    def _nothing_kept(self, stage: StageStats) -> str:
        reasons = ", ".join(f"{n} {reason}" for reason, n in Counter(stage.dropped).most_common(3))
        if not stage.docs_in:
            return (
                f"the input holds no documents ({sum(stage.records_skipped.values())} records read, none of "
                "them a document): check "
                f"input.paths and input.format; per-stage counts: {join_path(self.out, 'stats.json')}"
            )
        return (
            f"stage {stage.stage} dropped all {stage.docs_in} documents it was given "
            f"({reasons or 'no reason recorded'}), "
            f"so the run stops there with nothing kept; per-stage counts: {join_path(self.out, 'stats.json')}"
        )

    def _input_files(self) -> list[str]:
        cfg = self.config
        if not cfg.input.paths:
            raise UsageError("no input: set input.paths in the config or pass --input")
        expand = expand_code_inputs if cfg.input.format == "code" else expand_inputs  # code: folders are inputs
        files = expand(cfg.input.paths)
        check_output_outside_inputs(self.out, cfg.input.paths)
        return files

    # -- checks --------------------------------------------------------------------------------

    def _claim_output(self, files: list[str]) -> None:
        """Refuse (before any work) an output folder that holds another run's output, unless overwriting."""
        cfg = self.config
        identity = _fingerprint(
            {
                "files": files,
                "input": cfg.input.model_dump(mode="json"),
                "output": cfg.output.model_dump(mode="json", exclude={"dir"}),
                "steps": [step.fingerprint() for step in self.steps],
            }
        )
        description = {"inputs": cfg.input.paths, "input_files": len(files), "stages": [s.name for s in cfg.stages]}
        claim(self.out, identity, description, self.overwrite, tuple(step.name for step in self.steps))
        run = {
            "identity": identity,
            "config": cfg.source_path,
            "config_sha256": sha256_json(cfg.model_dump(mode="json")),
            "inputs": cfg.input.paths,
            "input_listing": listing([f if is_url(f) else os.path.abspath(f) for f in files]),
            "output": self.out if is_url(self.out) else os.path.abspath(self.out),
            "stages": [s.name for s in cfg.stages],
            "code": code_version(),
            "time": now(),
        }
        for stage in cfg.stages:
            stage.record_run(run)

    def _check_errors(self, step: Step, step_dir: str, stats: list[StageStats]) -> None:
        """Fail the step (no marker) when a stage's errors exceed the budget."""
        budget = self.config.error_budget
        failed = over_budget(stats, budget.max_fraction, budget.min_errors)
        if failed:
            self._fail(step, step_dir, failed)

    def _fail(self, step: Step, step_dir: str, failed: list[StageStats], early: str = "") -> None:
        """Save and print what went wrong, then raise naming each stage and its first error."""
        budget = self.config.error_budget
        report = describe_errors(failed, budget.max_fraction, budget.min_errors)
        remove_failed(self.spark, step_dir, {s.stage for s in failed})  # a rerun after the fix redoes them
        path = join_path(step_dir, ERRORS_FILE)
        atomic_write_text(path, json.dumps({"stages": [s.to_dict() for s in failed]}, indent=1, ensure_ascii=False))
        print(
            f"step {step.name}: FAILED, errors over budget\n{report}\nall error samples: {path}",
            file=sys.stderr,
            flush=True,
        )
        first = "; ".join(
            f"{s.stage}: {s.errors_seen.messages.most_common(1)[0][0]}" for s in failed if s.errors_seen.messages
        )
        raise ErrorBudgetExceeded(
            f"step {step.name} failed: "
            f"{early}{', '.join(f'{s.stage} ({s.errors} of {s.docs_in} documents)' for s in failed)} "
            f"raised errors past the error budget (first error: {first or 'none recorded'}); see {path}. "
            "Fix the cause and rerun: finished steps and tasks are kept."
        )

    @staticmethod
    def _check_input_read(stats: list[StageStats], files: int) -> None:
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

    def _ship_assets(self) -> None:
        """On a cluster, send the model files and folders stages name to every executor: their paths
        are the driver's, which executors (other machines, packed environments) may not have."""
        paths = {p for stage in self.config.stages for p in stage.asset_paths() if p and os.path.exists(p)}
        if not paths or self.spark.sparkContext.master.startswith("local"):
            return
        names: dict[str, str] = {}
        for path in sorted(paths):
            name = os.path.basename(os.path.abspath(path))
            if names.setdefault(name, path) != path:
                raise UsageError(
                    f"model paths {names[name]!r} and {path!r} share the name {name!r}; executors find "
                    "shipped files by name: rename one"
                )
            self.spark.sparkContext.addFile(os.path.abspath(path), recursive=os.path.isdir(path))

    # -- steps ---------------------------------------------------------------------------------

    def _kept(self, step_dir: str):
        from pyspark.sql import functions as F

        df = self.spark.read.parquet(join_path(step_dir, "data"))
        return df.where(F.col(DROP_REASON).isNull()).drop(DROP_STAGE, DROP_REASON)

    def _run_step(
        self, step: Step, step_dir: str, files: list[str], previous_dir: str | None, fingerprint: str
    ) -> tuple[list[StageStats], dict]:
        if step.is_global:
            return self._run_global(step, step_dir, previous_dir, fingerprint)
        return self._run_fused(step, step_dir, files, previous_dir, fingerprint)

    def _write(self, df, path: str) -> None:
        compression = self.config.output.compression
        df.write.mode("overwrite").option("compression", "none" if compression == "none" else compression).parquet(path)

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
        """Run the tasks of a fused step (or of a global step's ``stages``: its applier) that a previous
        run did not finish (``pipelines.tasks``); return the step's stats, summed over all its tasks,
        and its task counts."""
        from pyspark.sql.pandas.types import to_arrow_schema

        stages = step.stages if stages is None else stages

        if step.reads_input:
            input_dir, inputs, input_schema = None, files, read_schema(self.config.input.format)
        else:  # the previous step's parts, by name: a moved output folder keeps its finished tasks
            input_dir = join_path(previous_dir, DATA_DIR)
            inputs = parquet_parts(input_dir)
            input_schema = to_arrow_schema(self._kept(previous_dir).schema)
        schema = fused_schema(stages, input_schema)
        # One task per input file (small local files share one); later steps: per part of the previous step
        done, todo = self._plan_tasks(step_dir, inputs, fingerprint, by_name=not step.reads_input)
        if done:
            print(f"step {step.name}: reusing {len(done)} finished tasks, running {len(todo)}", flush=True)
        if todo:
            self._run_tasks(step, stages, step_dir, input_dir, todo, input_schema, schema, fingerprint, decisions)
        elif not done:
            write_empty(step_dir, schema, self.config.output.compression)
        names = ([READ_STAGE] if step.reads_input else []) + [s.name for s in stages]
        stats, keys = merged_stats(self.spark, step_dir, names)
        if len(keys) != len(done) + len(todo):
            raise RuntimeError(
                f"step {step.name}: {len(keys)} task markers for {len(done) + len(todo)} tasks; rerun to "
                "redo the missing ones"
            )
        if keys:  # temporary files of tasks killed mid-write
            remove_others(step_dir, keys)
        return stats, {"tasks": len(keys), "tasks_reused": len(done)}

    def _plan_tasks(
        self, task_dir: str, inputs: list[str], fingerprint: str, by_name: bool
    ) -> tuple[dict[str, dict], list[list[str]]]:
        """The tasks in ``task_dir`` a rerun keeps (``pipelines.tasks.reusable``; everything else there is
        deleted) and the inputs they do not cover, grouped into tasks (``file_tasks``); ``by_name``: inputs
        are named by their file name (parts of the previous step, so a moved output keeps its tasks)."""
        name = (lambda path: path.rsplit("/", 1)[-1]) if by_name else (lambda path: path)
        done = (
            {}
            if self.force
            else reusable(read_markers(self.spark, task_dir), fingerprint, [name(p) for p in inputs], task_dir)
        )
        remove_others(task_dir, done)
        covered = {path for marker in done.values() for path in marker["inputs"]}
        groups = file_tasks([p for p in inputs if name(p) not in covered], self.spark.sparkContext.defaultParallelism)
        return done, [[name(p) for p in group] for group in groups]

    def _run_tasks(
        self,
        step: Step,
        stages: list,
        step_dir: str,
        input_dir: str | None,
        todo: list[list[str]],
        input_schema,
        schema,
        fingerprint: str,
        decisions: str | None,
    ) -> None:
        """Run ``todo`` as Spark tasks, one row each of a ``spark.range`` (made in the JVM: a DataFrame
        built from a Python RDD would start a second Python worker per task just to convert its rows).
        The first wave (a task per core) runs alone when there are more, so a stage failing on most
        documents stops the step after one task's time; later ones are watched as they finish."""
        context = self.spark.sparkContext
        slots = context.defaultParallelism
        single = all(len(task) == 1 for task in todo) and step.reads_input
        group = f"dataprep-{step.name}-{fingerprint}"
        waves = [(0, slots), (slots, len(todo))] if len(todo) > slots else [(0, len(todo))]
        with (
            Progress(self.spark, step.name, unit="files" if single else "tasks", total=len(todo)) as progress,
            ErrorWatch(self.spark, self.config.error_budget, group) as watch,
        ):
            fn = make_partition_fn(
                step,
                stages,
                self.config.input,
                input_dir,
                input_schema,
                schema,
                self.config.output.write_dropped,
                step_dir,
                fingerprint,
                context.broadcast(todo),
                self.config.output.compression,
                progress.docs,
                watch.stats,
                decisions,
            )
            context.setJobGroup(group, f"dataprep step {step.name}", interruptOnCancel=True)
            try:
                for start, end in waves:
                    try:
                        tasks = self.spark.range(start, end, 1, end - start).mapInArrow(fn, "task long")
                        tasks.write.format("noop").mode("overwrite").save()
                    except Exception:
                        if not watch.failed:
                            raise
                    if watch.failed or (end < len(todo) and watch.check()):  # the last wave: the exact check decides
                        keys = {task_key(task) for task in todo}
                        ran = sum(marker.get("key") in keys for marker in read_markers(self.spark, step_dir))
                        self._fail(
                            step, step_dir, watch.failed, f"stopped early with {ran} of {len(todo)} tasks done: "
                        )
            finally:
                context.setLocalProperty("spark.jobGroup.id", None)
        progress.finish()

    def _run_global(
        self, step: Step, step_dir: str, previous_dir: str, fingerprint: str
    ) -> tuple[list[StageStats], dict]:
        """A global step: its decision over the whole corpus (kept from a previous run that made it with
        this config), then its applier run on each part of the previous step as tasks, which a rerun
        keeps as it keeps a fused step's."""
        from pipelines.global_runners import completes, global_runner

        stage = step.stages[0]
        runner = global_runner(stage)
        ctx = StepContext(spark=self.spark, step_dir=step_dir, config=self.config)
        decided = self._decide(step, step_dir, previous_dir, fingerprint, runner, ctx)
        remove_tree(join_path(step_dir, PREPARED_DIR))  # the decision holds what the tasks need of it
        applied = AppliedStage(applier=stage.applier(decided["state"]))
        decisions = join_path(step_dir, DECISIONS_DIR) if decided["rows"] else None
        stats, tasks = self._run_fused(
            step, step_dir, [], previous_dir, f"{fingerprint}-{decided['run']}", [applied], decisions
        )
        if completes(stage):
            stage.complete(decided["state"], read_markers(self.spark, step_dir))
        stats[0].merge(StageStats.from_dict(decided["stats"]))
        return stats, tasks

    def _decide(self, step: Step, step_dir: str, previous_dir: str, fingerprint: str, runner, ctx) -> dict:
        """The global step's decision: reused when a previous run saved one with this fingerprint over
        the same parts of the previous step, else made now and saved (``_DECIDED.json``: its stats, its
        state, and a run id that the tasks' markers carry, so tasks applying another decision are never
        kept), its rows split by the part of the previous step holding each document."""
        from pyspark.sql import functions as F

        from pipelines.dedup import BROADCAST_ROWS

        path = join_path(step_dir, DECIDED_MARKER)
        parts_key = task_key([p.rsplit("/", 1)[-1] for p in parquet_parts(join_path(previous_dir, DATA_DIR))])
        saved = None if self.force else _read_marker(path)
        if saved and saved.get("fingerprint") == fingerprint and saved.get("parts") == parts_key:
            print(f"step {step.name}: reusing the decision a previous run made", flush=True)
            return saved
        stage = step.stages[0]
        context = self.spark.sparkContext
        t0 = time.perf_counter()
        prepared_cpu = prepared_seconds = 0.0
        if runner.prepares:
            ctx.prepared, prepared_cpu, prepared_seconds = self._prepare(
                step, step_dir, previous_dir, fingerprint, (stage.prepare, stage.prepared_schema)
            )
        group = f"dataprep-{step.name}-{uuid.uuid4().hex}"
        context.setJobGroup(group, f"dataprep step {step.name}: decide", interruptOnCancel=True)
        try:
            kept = self._kept(previous_dir)
            with (
                python_cpu(self.spark) as worker_cpu,
                Progress(self.spark, f"{step.name} decide", unit="Spark tasks", counts_docs=False) as progress,
            ):
                rows, state = runner.decide(kept, stage, ctx)
                if rows is not None:  # few rows (the documents concerned) beside every document's part
                    parts = kept.select("id", F.element_at(F.split(F.input_file_name(), "/"), -1).alias(PART))
                    rows = parts.join(F.broadcast(rows) if rows.count() <= BROADCAST_ROWS else rows, "id")
                    # grouped by part first: a writer task per part, not a file per part in every task
                    rows.repartition(PART).write.mode("overwrite").partitionBy(PART).parquet(
                        join_path(step_dir, DECISIONS_DIR)
                    )
            self.spark.catalog.clearCache()  # runners may cache what they computed
            stats = StageStats(stage.name, seconds=time.perf_counter() - t0)
        finally:
            context.setLocalProperty("spark.jobGroup.id", None)
        stats.executor_seconds, jvm_cpu = executor_seconds(self.spark, group)
        stats.executor_seconds += prepared_seconds  # the prepare tasks', reused ones included
        stats.executor_cpu_seconds = jvm_cpu + worker_cpu.value + prepared_cpu
        stats.executor_fixed_cpu_seconds = executor_fixed_cpu_seconds(self.spark, group) + worker_cpu.fixed
        stats.record_counters(stage)  # counts the runner recorded on the driver
        progress.finish()
        decided = {
            "fingerprint": fingerprint,
            "parts": parts_key,
            "run": uuid.uuid4().hex[:12],
            "state": state,
            "rows": rows is not None,
            "stats": stats.to_dict(),
        }
        atomic_write_text(path, json.dumps(decided, indent=1))
        return decided

    def _prepare(self, step: Step, step_dir: str, previous_dir: str, fingerprint: str, prepare) -> tuple:
        """Run the per-document part of a decision (the stage's ``prepare``) as tasks over the previous
        step's parts, keeping those a previous run finished with this config (``pipelines.tasks``);
        return the rows as a DataFrame, and the CPU and task seconds of all tasks."""
        from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

        fn, schema = prepare
        prepared_dir = join_path(step_dir, PREPARED_DIR)
        input_dir = join_path(previous_dir, DATA_DIR)
        done, todo = self._plan_tasks(prepared_dir, parquet_parts(input_dir), fingerprint, by_name=True)
        context = self.spark.sparkContext
        if done:
            print(f"step {step.name}: reusing {len(done)} prepared tasks, running {len(todo)}", flush=True)
        if todo:
            context.setJobGroup(
                f"dataprep-{step.name}-prepare", f"dataprep step {step.name}: prepare", interruptOnCancel=True
            )
            try:
                with Progress(self.spark, f"{step.name} prepare", total=len(todo)) as progress:
                    fn = make_prepare_fn(
                        fn,
                        input_dir,
                        to_arrow_schema(self._kept(previous_dir).schema),
                        schema,
                        prepared_dir,
                        fingerprint,
                        context.broadcast(todo),
                        self.config.output.compression,
                        self.config.input.batch_size,
                        progress.docs,
                    )
                    self.spark.range(0, len(todo), 1, len(todo)).mapInArrow(fn, "task long").write.format("noop").mode(
                        "overwrite"
                    ).save()
            finally:
                context.setLocalProperty("spark.jobGroup.id", None)
            progress.finish()
        markers = [m for m in read_markers(self.spark, prepared_dir) if m.get("fingerprint") == fingerprint]
        if len(markers) != len(done) + len(todo):
            raise RuntimeError(
                f"step {step.name}: {len(markers)} prepared task markers for {len(done) + len(todo)} tasks; "
                "rerun to redo the missing ones"
            )
        rows = self.spark.read.schema(from_arrow_schema(schema)).parquet(join_path(prepared_dir, DATA_DIR))
        return rows, sum(m["cpu_seconds"] for m in markers), sum(m["seconds"] for m in markers)

    def _write_corpus(self, last_dir: str, corpus_dir: str, fingerprint: str, redo: bool) -> None:
        marker = join_path(corpus_dir, DONE_MARKER)
        done = _read_marker(marker)
        if not redo and done and done.get("fingerprint") == fingerprint:
            return
        df = self._corpus_frame(self._kept(last_dir))
        check_dataset_folder(corpus_dir)
        self._write(df, corpus_dir)
        atomic_write_text(marker, json.dumps({"fingerprint": fingerprint}))

    @staticmethod
    def _corpus_frame(df):
        """The kept documents as the corpus holds them (working columns left out)."""
        return df.drop(*[c for c in ("_bytes", "html") if c in df.columns])


def run_pipeline(config: PipelineConfig, spark=None, force: bool = False, overwrite: bool = False) -> RunResult:
    return PipelineRun(config, spark=spark, force=force, overwrite=overwrite).run()
