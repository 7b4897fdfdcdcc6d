"""The cleaning pipeline on a real Spark standalone cluster (master + two workers on 127.0.0.1),
submitted with ``scripts/submit_pipeline.sh`` (spark-submit, code shipped as an archive): the output
equals a local-mode run, also when a worker is killed in the middle of the job.

Run alone with ``pytest -m cluster tests/pipelines/test_cluster_spark.py``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dataprep.core.config import load_config
from dataprep.core.stats import TIMING_FIELDS
from pipelines.cluster import StandaloneCluster
from pipelines.pipeline_run import run_pipeline

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
SUBMIT = ROOT / "scripts" / "submit_pipeline.sh"
SHUFFLE_PARTITIONS = "4"  # few tiny tasks: scheduling, not data, dominates at this size
JOB_TIMEOUT = 420  # seconds per submitted job; the loaded 2-core CI machine is slow to start JVMs

# Ingestion, quality, safety, then MinHash dedup (a global step: shuffles across workers). Exact
# dedup is left out to keep the test short: its duplicates are caught by MinHash as well.
STAGES = [
    {"stage": "extract"},
    {"stage": "langid", "threshold": 0.3},
    {"stage": "url_filter"},
    {"stage": "gopher_repetition"},
    {"stage": "gopher_quality"},
    {"stage": "c4_quality", "filter_no_terminal_punct": False},
    {"stage": "fineweb_quality"},
    {"stage": "pii"},
    {"stage": "minhash_dedup"},
]


@pytest.fixture(scope="module")
def job_input(shared_data, tmp_path_factory) -> list[str]:
    """Every WARC/WET sample (malformed ones included) plus one JSONL file of real documents three
    times: verbatim, copied (exact duplicates) and lightly edited (near duplicates), so that both
    dedup stages drop documents across files, hence across tasks and workers."""
    files = sorted(str(p) for p in (shared_data / "warc").rglob("*") if p.is_file() and ".wat" not in p.name)
    docs = tmp_path_factory.mktemp("cluster-input")
    original = shared_data / "documents" / "redpajama-cc-2023-06-refined.jsonl"
    shutil.copy(original, docs / "copy.jsonl")
    with open(original) as src, open(docs / "edited.jsonl", "w") as dst:
        for line in src:
            doc = json.loads(line)
            doc["text"] += "\nShare this page."
            dst.write(json.dumps(doc) + "\n")
    return files + [str(original), str(docs / "copy.jsonl"), str(docs / "edited.jsonl")]


def _config(paths: list[str], out: Path, app_name: str) -> dict:
    return {
        "input": {"paths": paths, "batch_size": 5},
        "output": {"dir": str(out)},
        "spark": {"app_name": app_name},
        "stages": STAGES,
    }


def _corpus(path: Path) -> list[dict]:
    return sorted(pq.read_table(path).to_pylist(), key=lambda d: (d["source"], d["id"]))


def _counts(stages: list[dict]) -> list[dict]:
    # error samples hold tracebacks, whose file paths differ where the code was unpacked
    return [{k: v for k, v in s.items() if k not in (*TIMING_FIELDS, "error_samples")} for s in stages]


@pytest.fixture(scope="module")
def local_run(spark, job_input, tmp_path_factory):
    """The same pipeline in local mode (the session's local[2] SparkSession): the expected output."""
    out = tmp_path_factory.mktemp("local-run")
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", SHUFFLE_PARTITIONS)
    try:
        result = run_pipeline(load_config(_config(job_input, out / "out", "local-reference")), spark=spark)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", partitions)
    corpus = _corpus(Path(result.corpus_dir))
    stats = _counts(json.loads((out / "out" / "stats.json").read_text())["stages"])
    by_stage = {s["stage"]: s for s in stats}
    assert by_stage["minhash_dedup"]["docs_dropped"] >= 10, "the copied and edited documents should be duplicates"
    return corpus, stats


@pytest.fixture(scope="module")
def _cluster_starting(tmp_path_factory):
    """Master + two 1-core workers, started in the background; stopped (with every executor) however
    the tests end."""
    cluster = StandaloneCluster(str(tmp_path_factory.mktemp("spark-cluster")), workers=2, cores=1, memory="1500m")
    with ThreadPoolExecutor(1) as pool:
        started = pool.submit(cluster.start)
        try:
            yield started
        finally:
            wait([started])
            cluster.stop()


@pytest.fixture(scope="module")
def cluster(_cluster_starting, local_run) -> StandaloneCluster:
    """The running cluster; the local reference run happens while its JVMs start."""
    return _cluster_starting.result()


def _submit(
    cluster: StandaloneCluster, job: dict, tmp_path: Path, cwd: Path | None = None
) -> tuple[subprocess.Popen, Path]:
    config = tmp_path / "job.yaml"
    config.write_text(json.dumps(job))  # JSON is YAML
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_GATEWAY")}
    env.update(
        SPARK_LOCAL_IP="127.0.0.1",
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        CCP_CHECKPOINT_DIR=str(tmp_path / "checkpoints"),
    )
    cmd = [
        "bash",
        str(SUBMIT),
        "--master",
        cluster.master_url,
        "--executor-memory",
        "1g",
        "--driver-memory",
        "1g",
        "--conf",
        f"spark.sql.shuffle.partitions={SHUFFLE_PARTITIONS}",
        "--",
        str(config),
    ]
    log = tmp_path / "driver.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd)
    return proc, log


def _finish(proc: subprocess.Popen, log: Path) -> None:
    try:
        rc = proc.wait(timeout=JOB_TIMEOUT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert rc == 0, f"spark-submit failed ({rc}):\n{log.read_text(errors='replace')[-4000:]}"


def _app(cluster: StandaloneCluster, name: str, state: str = "activeapps") -> dict | None:
    return next((a for a in cluster.status()[state] if a["name"] == name), None)


def _executor_logs(cluster: StandaloneCluster, worker: int, app_id: str) -> str:
    return "".join(
        p.read_text(errors="replace") for p in Path(cluster.state_dir, f"worker-{worker}", app_id).glob("*/stderr")
    )


def test_cluster_output_equals_local_mode(cluster, job_input, local_run, tmp_path):
    expected, expected_stats = local_run
    out = tmp_path / "out"
    proc, log = _submit(cluster, _config(job_input, out, "cluster-plain"), tmp_path)
    _finish(proc, log)

    assert _corpus(out / "corpus") == expected
    assert _counts(json.loads((out / "stats.json").read_text())["stages"]) == expected_stats
    app = _app(cluster, "cluster-plain", "completedapps")
    assert app is not None and app["state"] == "FINISHED"
    for worker in (0, 1):  # both workers ran tasks: the work really was spread
        assert "Finished task" in _executor_logs(cluster, worker, app["id"])


def _unfinished_tasks(executor_log: str) -> set[tuple[str, str]]:
    """(partition, stage) of the tasks an executor started and did not finish."""
    started = set(re.findall(r"Running task (\d+)\.\d+ in stage (\d+)\.", executor_log))
    return started - set(re.findall(r"Finished task (\d+)\.\d+ in stage (\d+)\.", executor_log))


def test_driver_killed_mid_step_resumes_with_the_finished_tasks(cluster, job_input, local_run, tmp_path):
    """The driver (spark-submit and its Python) is killed with SIGKILL once a task of the first step has
    finished; the same command again reuses the finished tasks and gives the local run's output."""
    expected, expected_stats = local_run
    assert cluster.wait_for_workers(2)["aliveworkers"] == 2
    out = tmp_path / "out"
    job = _config(job_input, out, "cluster-driver-kill")
    proc, log = _submit(cluster, job, tmp_path)
    step = out / "steps" / "00_read-pii"
    try:
        deadline = time.time() + JOB_TIMEOUT
        while proc.poll() is None and time.time() < deadline and not list((step / "_stats").glob("part-*.json")):
            time.sleep(0.1)
        assert proc.poll() is None and not (step / "_STEP_DONE.json").exists(), "the step ended before the kill"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    finished = len(list((step / "_stats").glob("part-*.json")))
    proc, log = _submit(cluster, job, tmp_path)
    _finish(proc, log)

    assert _corpus(out / "corpus") == expected
    resumed = json.loads((out / "stats.json").read_text())
    assert _counts(resumed["stages"]) == expected_stats
    first = resumed["steps"][0]
    assert first["step"] == "00_read-pii" and 0 < finished <= first["tasks_reused"] < first["tasks"]


def test_worker_killed_mid_job_keeps_each_document_exactly_once(cluster, job_input, local_run, tmp_path):
    expected, expected_stats = local_run
    assert cluster.wait_for_workers(2)["aliveworkers"] == 2
    out = tmp_path / "out"
    proc, log = _submit(cluster, _config(job_input, out, "cluster-kill"), tmp_path)
    try:
        # Kill worker 1 (with its executor and Python workers) once it has finished one task and is
        # running another.
        deadline = time.time() + JOB_TIMEOUT
        app = None
        while proc.poll() is None and time.time() < deadline:
            app = app or _app(cluster, "cluster-kill")
            victim = _executor_logs(cluster, 1, app["id"]) if app else ""
            if "Finished task" in victim and _unfinished_tasks(victim):
                break
            time.sleep(0.1)
        assert proc.poll() is None and not (out / "stats.json").exists(), "the job ended before the kill"
        cluster.kill_worker(1)
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    _finish(proc, log)

    assert _corpus(out / "corpus") == expected
    assert _counts(json.loads((out / "stats.json").read_text())["stages"]) == expected_stats
    assert "Lost executor" in log.read_text(errors="replace"), "the driver never saw the executor go"
    assert _app(cluster, "cluster-kill", "completedapps")["state"] == "FINISHED"
    survivor = _executor_logs(cluster, 0, app["id"])
    for partition, stage in _unfinished_tasks(_executor_logs(cluster, 1, app["id"])):
        assert re.search(rf"Finished task {partition}\.\d+ in stage {stage}\.", survivor), "a lost task was not redone"


def test_a_model_path_only_the_driver_has_is_shipped_to_the_executors(cluster, job_input, tmp_path):
    """A relative model path exists in the driver's working directory only (executors run in their
    worker's work folder, as on YARN or Kubernetes): the runner ships the file, tasks find it."""
    from dataprep.classify.langid import default_model_path

    driver_dir = tmp_path / "driver"
    (driver_dir / "models").mkdir(parents=True)
    shutil.copy(default_model_path(), driver_dir / "models" / "lid-driver-only.ftz")
    out = tmp_path / "out"
    job = {
        "input": {"paths": job_input[:3], "batch_size": 5},
        "output": {"dir": str(out)},
        "spark": {"app_name": "cluster-driver-model"},
        "stages": [{"stage": "extract"}, {"stage": "langid", "model_path": "models/lid-driver-only.ftz"}],
    }
    proc, log = _submit(cluster, job, tmp_path, cwd=driver_dir)
    _finish(proc, log)
    langid = next(s for s in json.loads((out / "stats.json").read_text())["stages"] if s["stage"] == "langid")
    assert langid["docs_in"] > 0 and langid["errors"] == 0 and langid["docs_kept"] == langid["docs_in"]
    corpus = pq.read_table(out / "corpus")
    assert corpus.num_rows == langid["docs_in"] and None not in corpus.column("lang").to_pylist()
