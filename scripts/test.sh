#!/usr/bin/env bash
# Runs the lint and format gate (ruff, configured in pyproject.toml), then the test suite, in the project
# virtualenv (created on first use). Extra arguments go to pytest; --fast leaves out the slow and cluster tests
# (the developer loop; CI runs everything).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/env.sh"
cd "$ROOT"
# kenlm (the optional [kenlm] extra, compiled from source) lets the ARPA agreement test run against the real
# package; a failed build is remembered and only skips that test.
if ! python -c "import kenlm" 2>/dev/null && [ ! -e "$VIRTUAL_ENV/.kenlm-build-failed" ]; then
  echo "[test] building kenlm for the ARPA agreement test (a few minutes, once per virtualenv)"
  python -m pip install -q "kenlm==0.3.0" || { touch "$VIRTUAL_ENV/.kenlm-build-failed"; echo "[test] kenlm did not build: its agreement test is skipped"; }
fi
ruff check -q . && ruff format -q --check . \
  || { echo "[test] lint or format gate failed: run \`ruff format . && ruff check --fix .\` and fix what remains"; exit 1; }
export SPARK_LOCAL_IP=127.0.0.1
ARGS=()
for arg in "$@"; do
  if [ "$arg" = "--fast" ]; then ARGS+=(-m "not slow and not cluster"); else ARGS+=("$arg"); fi
done
exec python -m pytest -q -p no:cacheprovider "${ARGS[@]}"
