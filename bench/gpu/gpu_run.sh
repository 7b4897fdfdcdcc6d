#!/usr/bin/env bash
# The GPU proof in one command: sets up Python on the GPU machine, runs bench/gpu/bench_gpu.py's matrix and the
# CUDA tests, and leaves one JSON per part and one log under $OUT (default out/gpu).
#
#   bash bench/gpu/gpu_run.sh prepare        # on a machine with a package index: fill .gpu/ (carried to the GPU)
#   bash bench/gpu/gpu_run.sh [PART ...]     # on the GPU machine; PART: tests throughput ablation memory
#                                        # memory-compiled precision attention (default: all, in that order)
#
# Python there: if its python3 already imports a CUDA build of torch (the accelerator image lent by the
# `device` tool: no network, torch preinstalled), the wheels `prepare` put in .gpu/whl are installed beside
# it (--no-index) and the repo runs from its checkout; any other machine gets the repo's own virtualenv from
# scripts/env.sh, with CCP_TORCH_SPEC naming the CUDA torch build to install.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CARRY="$ROOT/.gpu"  # git-ignored; travels only when named (the device tool's `carry`)
# What the bench and tests import that the accelerator image lacks: pydantic and its own dependencies.
WHEELS=(pydantic pydantic-core annotated-types typing-inspection typing-extensions)
# The files of ../shared/data the CUDA export test reads (test_tokenize.load_texts).
TEST_DATA=(langid/lingua-sentences-75langs-300each.jsonl documents/dolma-cc_en_head-0091.jsonl.gz
           documents/dolma-cc-2023-06-documents-000.json.gz documents/redpajama-cc-2023-06-refined.jsonl)

prepare() {
  local py="${PYTHON:-python3}" specs=() shared="${CCP_SHARED_DATA:-$ROOT/../shared/data}"
  for name in "${WHEELS[@]}"; do  # the versions this environment runs, so both sides agree
    specs+=("$name==$("$py" -c "import importlib.metadata as m; print(m.version('$name'))")")
  done
  rm -rf "$CARRY/whl" && mkdir -p "$CARRY/whl"
  "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$CARRY/whl" "${specs[@]}"
  for f in "${TEST_DATA[@]}"; do
    mkdir -p "$CARRY/data/$(dirname "$f")" && cp "$shared/$f" "$CARRY/data/$f"
  done
  du -sh "$CARRY"; ls "$CARRY/whl"
}

setup_python() {
  if python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    PY=python3
    export PYTHONPATH="$ROOT"
    if compgen -G "$CARRY/whl/*.whl" >/dev/null; then
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/ccp-site \
        "$CARRY"/whl/*.whl
      export PYTHONPATH="$ROOT:/tmp/ccp-site"
    fi
  else
    export CCP_VENV="${CCP_VENV:-$ROOT/.venv-gpu}"
    # shellcheck disable=SC1091
    source "$ROOT/scripts/env.sh"  # CCP_TORCH_SPEC: the CUDA build of torch to install
    PY=python
    export PYTHONPATH="$ROOT"
  fi
  if [ -d "$CARRY/data" ]; then export CCP_SHARED_DATA="$CARRY/data"; fi
  "$PY" -c 'import torch, pydantic, yaml
assert torch.cuda.is_available(), "torch sees no CUDA device"
print(f"[gpu_run] {torch.cuda.get_device_name()}, torch {torch.__version__} (CUDA {torch.version.cuda}), pydantic {pydantic.VERSION}")'
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit --format=csv || true
  fi
}

bench() {  # bench NAME ARGS...: one bench_gpu.py run, its JSON at $OUT/NAME.json
  local name="$1"; shift
  echo "[gpu_run] $name: python -m bench.gpu.bench_gpu $*"
  "$PY" -m bench.gpu.bench_gpu --json "$OUT/$name.json" "$@"  # bench is found through PYTHONPATH=$ROOT
}

part() {
  case "$1" in
    # MFU of each preset: bf16, compiled blocks, fused AdamW, no checkpointing, bare model
    throughput) bench throughput --models 125m 350m 1b ;;
    # what torch.compile and fused AdamW each add at 1B
    ablation) bench ablation --models 1b --compile off on --adamw fused foreach ;;
    # measured peak against the planner, per checkpointing mode, bare and FSDP, eager
    memory) bench memory --models 350m 1b --compile off --checkpointing none selective block --fsdp off on \
              --steps 6 --warmup 2 ;;
    # the same with compiled blocks (bare model)
    memory-compiled) bench memory-compiled --models 350m 1b --compile on --checkpointing none selective block \
                       --steps 6 --warmup 2 ;;
    # loss curves over 300 steps of the same tokens: bf16 and fp16 (loss scaling) against fp32
    precision) bench precision --models 125m --compile off --precision fp32 bf16 fp16 --seq-len 1024 \
                 --steps 300 --warmup 10 --lr 1e-3 ;;
    # SDPA kernels: fp16 training per kernel (cuDNN's lags), and bf16 speed of flash against cuDNN
    attention) bench attention-fp16 --models 125m --compile off --precision fp16 --attention flash efficient cudnn \
                 --seq-len 1024 --steps 300 --warmup 10 --lr 1e-3 &&
               bench attention-bf16 --models 350m 1b --attention flash cudnn ;;
    # the CPU parity tests' GPU analogues, and the bench's own CUDA test
    tests) (cd "$ROOT" && "$PY" -m pytest -q -p no:cacheprovider tests/pretrain/train/test_train_cuda.py tests/bench/test_bench_gpu.py) ;;
    *) echo "unknown part $1 (tests throughput ablation memory memory-compiled precision attention, or prepare)" >&2
       return 2 ;;
  esac
}

main() {
  setup_python
  local parts=("$@") status=0
  [ ${#parts[@]} -gt 0 ] || parts=(tests throughput ablation memory memory-compiled precision attention)
  for p in "${parts[@]}"; do
    part "$p" || { echo "[gpu_run] $p failed ($?)"; status=1; }
  done
  echo "[gpu_run] done: JSON and log under $OUT"
  return $status
}

if [ "${1:-}" = prepare ]; then
  prepare
  exit 0
fi
OUT="${OUT:-$ROOT/out/gpu}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
# one log for every part (the device tool brings back at most 8 files)
main "$@" 2>&1 | tee -a "$OUT/gpu_run.log"
exit "${PIPESTATUS[0]}"
