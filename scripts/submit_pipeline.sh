#!/usr/bin/env bash
# Submit the cleaning pipeline (pipelines/cli.py run) to a Spark cluster with spark-submit (client mode).
#
#   scripts/submit_pipeline.sh [SPARK-SUBMIT OPTIONS --] CONFIG.yaml [--input PATH...] [--output DIR] [--force]
#
#   scripts/submit_pipeline.sh --master spark://10.0.0.5:7077 --executor-memory 4g -- \
#       configs/pipeline/ingest.yaml --output /shared/cc-out \
#       --input https://data.commoncrawl.org/crawl-data/CC-MAIN-2024-22/warc.paths.gz
#
# What travels to the executors:
#   code    this checkout's dataprep/ and pipelines/, zipped and unpacked on every executor
#           (--archives ZIP#ccpretrain_code, put first on the executors' PYTHONPATH), so executors run
#           exactly the driver's code. Unpacked rather than imported from the zip (--py-files) because
#           stages read their shipped assets (URL blocklists, word lists) as plain files.
#   Python  CCP_PYTHON_ENV=env.tar.gz: a venv-pack / conda-pack archive of an environment holding
#           ccpretrain's dependencies, unpacked on every executor (--archives ENV#environment); use it
#           on YARN, Kubernetes or any cluster without a shared filesystem. Without it, executors run
#           $PYSPARK_PYTHON (default: this shell's python3), which must exist at the same path on every
#           node: a virtualenv on a shared filesystem, or the same container image everywhere.
#
# Environment: SPARK_SUBMIT (default: the spark-submit inside the installed pyspark), CCP_PYTHON_ENV,
# PYSPARK_PYTHON, PYSPARK_DRIVER_PYTHON, CCP_CHECKPOINT_DIR (shared storage for dedup checkpoints,
# e.g. s3a://bucket/tmp/ckpt: without it a lost executor can fail a dedup step).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

submit_args=()
if [[ " $* " == *" -- "* ]]; then
  while [[ $# -gt 0 && "$1" != "--" ]]; do submit_args+=("$1"); shift; done
  shift
fi
if [[ $# -lt 1 ]]; then
  sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi

DRIVER_PY="${PYSPARK_DRIVER_PYTHON:-$(command -v python3)}"
SPARK_SUBMIT="${SPARK_SUBMIT:-$("$DRIVER_PY" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit"))')}"

work="$(mktemp -d "${TMPDIR:-/tmp}/ccpretrain-submit.XXXXXX")"
trap 'rm -rf "$work"' EXIT
code_zip="$work/ccpretrain_code.zip"
"$DRIVER_PY" - "$ROOT" "$code_zip" <<'PY'
import os, sys, zipfile
root, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for pkg in ("dataprep", "pipelines"):
        for d, dirs, files in os.walk(os.path.join(root, pkg)):
            dirs[:] = [x for x in dirs if x != "__pycache__"]
            for f in files:
                if not f.endswith(".pyc"):
                    path = os.path.join(d, f)
                    z.write(path, os.path.relpath(path, root))
PY

conf=(--archives "$code_zip#ccpretrain_code" --conf spark.executorEnv.PYTHONPATH=ccpretrain_code)
if [[ -n "${CCP_PYTHON_ENV:-}" ]]; then
  conf=(--archives "$code_zip#ccpretrain_code,$CCP_PYTHON_ENV#environment"
        --conf spark.executorEnv.PYTHONPATH=ccpretrain_code
        --conf spark.pyspark.python=./environment/bin/python)
else
  conf+=(--conf "spark.pyspark.python=${PYSPARK_PYTHON:-$(command -v python3)}")
fi
[[ -n "${CCP_CHECKPOINT_DIR:-}" ]] && conf+=(--conf "spark.checkpoint.dir=$CCP_CHECKPOINT_DIR")

# The driver runs here and imports the checkout directly. PYTHONSAFEPATH: Python must not put the
# script folder pipelines/ first on sys.path, where its modules could shadow standard-library ones.
export PYSPARK_DRIVER_PYTHON="$DRIVER_PY" PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" PYTHONSAFEPATH=1
"$SPARK_SUBMIT" "${conf[@]}" --conf spark.pyspark.driver.python="$DRIVER_PY" "${submit_args[@]}" \
  "$ROOT/pipelines/cli.py" run "$@"
