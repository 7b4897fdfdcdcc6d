"""Spark's Python daemon (``spark.python.daemon.module``) with the pipeline's modules and the default
language-ID model loaded before it forks any worker.

PySpark starts one daemon per executor and forks a Python worker from it for each concurrent task
slot; with ``spark.python.worker.reuse`` the workers then serve task after task. Each forked worker
would otherwise import pyarrow, Resiliparse, Trafilatura, fastText and our stages itself and load
lid.176 (and lingua's models where it is installed): done here, that cost is paid once per executor and the workers
share the pages (copy-on-write). Everything loaded here must start no thread (a fork copies only the forking one): these
imports do not. A module that fails to import here is simply imported by the worker later.
"""

from __future__ import annotations

import importlib
import os
import sys

PRELOAD = (
    "pyarrow",
    "numpy",
    "pandas",  # pyarrow imports it on a worker's first Table.from_pylist, and PySpark's Arrow code needs it
    "pipelines.steps",
    "dataprep.html.extract",
    "trafilatura",
    "dataprep.classify.langid",
    "dataprep.quality.gopher",
    "dataprep.quality.gopher_repetition",
    "dataprep.quality.c4",
    "dataprep.quality.fineweb",
    "dataprep.dedup.minhash",
)


def use_installed_pyspark(path: list[str] = sys.path) -> None:
    """Import pyspark and py4j from their installed packages instead of the zips Spark puts first on a
    worker's path: Python compiles a module imported from a zip anew in every process (no .pyc cache),
    ~0.6 s of CPU per daemon for pyspark's ~110 modules. Only zips that belong to the installed pyspark
    itself (``<site-packages>/pyspark/python/lib``, as pip installs it: local mode, or executors running
    the same environment) are dropped, so the code imported cannot differ; a Spark distribution's zips
    stay."""
    real = {os.path.realpath(entry) for entry in path if not entry.endswith(".zip")}
    for entry in list(path):
        lib = os.path.dirname(entry)
        package = os.path.dirname(os.path.dirname(lib))
        site = os.path.dirname(package)
        if not entry.endswith(".zip") or os.path.basename(package) != "pyspark" or os.path.realpath(site) not in real:
            continue
        name = os.path.basename(entry)
        py4j_installed = name.startswith("py4j-") and os.path.isdir(
            os.path.join(site, name.removesuffix("-src.zip") + ".dist-info")
        )
        if name == "pyspark.zip" or py4j_installed:
            path.remove(entry)


def preload() -> None:
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:  # an extra not installed: its stages are not in use
            pass
    try:
        import pyarrow as pa

        pa.Table.from_pylist([{"warm": 1}])  # pyarrow's lazy pandas shim, set up once here
        from dataprep.classify.langid import default_model_path, load_model

        load_model(default_model_path())  # cached per process: forked workers inherit it
        preload_lingua()
    except Exception:
        pass


def preload_lingua() -> None:
    """lingua's trigram models (the default low-accuracy mode of langid's second opinion), loaded by
    labelling a sentence per script family (langid reads one text at a time: no thread pool to fork)."""
    from dataprep.classify.langid import lingua_detector, lingua_installed

    if lingua_installed():
        detector = lingua_detector("low")
        for text in WARM_TEXTS:
            detector.compute_language_confidence_values(text)


WARM_TEXTS = (
    "The models load on the first text they read, once here instead of once per worker.",
    "Модели загружаются при первом тексте, который они читают.",
    "تحميل النماذج عند أول نص تقرؤه",
)


if __name__ == "__main__":
    use_installed_pyspark()
    preload()
    from pyspark.daemon import manager

    manager()
