"""SparkSession creation: local[*] by default, or whatever master spark-submit / the config names.

Executors must run the same Python as the driver (the project venv), and Arrow must be on for
mapInArrow; both are set here so every job and test gets them.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from dataprep.core.errors import WorkFailed
from pipelines import class_archive, interrupt

DEFAULT_CONF = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "2000",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "4g",
    "spark.python.worker.reuse": "true",
    "spark.task.maxFailures": "4",
}
# Local mode only (the driver JVM is also the executor, started by us): C1-compiled code only. That JVM
# mostly moves Arrow batches to Parquet, and C2 compilation costs more CPU than it saves there
# (bench/pipeline/bench_pipeline.py measures it). Clusters keep their JVM defaults.
# No web UI in local mode (tests, laptops); cluster masters keep Spark's UI on port 4040, where users
# watch a long job.
# Local sessions also map a class-data-sharing archive of Spark's classes (pipelines/class_archive.py).
# Its logging: pipelines/log4j2.properties (warnings only, no banner).
LOG_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "log4j2.properties")
LOCAL_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
LOCAL_CONF = {"spark.driver.extraJavaOptions": LOCAL_JAVA_OPTIONS, "spark.ui.enabled": "false"}
# Local mode only: the Python daemon that forks the workers imports our modules and loads lid.176
# first (pipelines/worker_daemon.py), so a session pays that once instead of once per worker. Its
# workers find the package through PYTHONPATH, which ``_local_defaults`` extends with this checkout.
# Clusters keep PySpark's daemon: their executors' environments are theirs to set.
WORKER_DAEMON = "pipelines.worker_daemon"
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _local_defaults() -> dict[str, str]:
    python_path = os.pathsep.join(p for p in (PACKAGE_ROOT, os.environ.get("PYTHONPATH", "")) if p)
    return {
        **DEFAULT_CONF,
        **LOCAL_CONF,
        "spark.python.daemon.module": WORKER_DAEMON,
        "spark.executorEnv.PYTHONPATH": python_path,
    }


def get_spark(
    master: str | None = None, app_name: str = "ccpretrain", conf: dict[str, str] | None = None
) -> SparkSession:
    """Return the active session (spark-submit made one) or build one.

    ``master`` None keeps whatever spark-submit chose, falling back to local[*].
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.appName(app_name)
    under_spark_submit = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit already chose a master
    defaults = DEFAULT_CONF
    if master or not under_spark_submit:
        builder = builder.master(master or "local[*]")
        if (master or "local").startswith("local"):
            defaults = _local_defaults()
    if under_spark_submit:  # spark-submit --conf and spark-defaults.conf win over our defaults
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()  # joins spark-submit's JVM, whose properties SparkConf() loads
        given = SparkConf()
        local = (master or given.get("spark.master", "local")).startswith("local")
        chosen = {**DEFAULT_CONF, "spark.ui.enabled": "false"} if local else DEFAULT_CONF
        defaults = {k: v for k, v in chosen.items() if not given.contains(k)}
    settings = {**defaults, **(conf or {})}
    archive_note = None
    if settings.get("spark.driver.extraJavaOptions") == LOCAL_JAVA_OPTIONS:
        class_options, archive_note = class_archive.java_options()  # local session, our JVM options
        settings["spark.driver.extraJavaOptions"] = (
            f"{LOCAL_JAVA_OPTIONS} -Dlog4j2.configurationFile=file:{LOG_CONFIG} {class_options}".strip()
        )
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        with interrupt.held():
            spark = builder.getOrCreate()
    except Exception as exc:  # noqa: BLE001 - PySpark's start-up errors have no common base
        if "JAVA_GATEWAY_EXITED" not in str(exc) and "JAVA_HOME" not in str(exc):
            raise
        raise WorkFailed(
            f"Spark's JVM did not start (master {master or 'local[*]'}): check that Java 17 is installed "
            "(`java -version`, or set JAVA_HOME) and the master's address; its own message is printed above"
        ) from None
    spark.sparkContext.setLogLevel("WARN")
    interrupt.install()  # instead of PySpark's handler, which raises inside py4j calls
    if archive_note:
        class_archive.record_class_path(archive_note, spark.sparkContext._jvm.System.getProperty("java.class.path"))
    return spark
