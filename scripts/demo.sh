#!/usr/bin/env bash
# The whole flow on the bundled sample, locally, in a few minutes on 2 cores:
# sample WARC -> every cleaning stage -> tokenizer -> token shards -> budget and plan for this machine
# -> a short CPU training run -> report. Outputs go to out/demo/ (removed first).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/env.sh"
cd "$ROOT"
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
OUT=out/demo
rm -rf "$OUT"
step() { printf '\n==> %s\n' "$*"; }

step "1. sample crawl: a WARC of pages written for the demo"
dataprep demo-data --output "$OUT/input"

step "2. perplexity model (CCNet-style) from the demo's English reference articles"
dataprep train-ppl-model --input "$OUT/input/reference_en.jsonl" --lang en --output "$OUT/ppl-en" --vocab-size 500

step "3. cleaning pipeline on Spark (local mode): extract, langid, filters, safety, dedup, tokenize"
dataprep run configs/pipeline/demo.yaml

step "4. verify the token shards"
dataprep verify-shards "$OUT/pipeline/shards"

# This machine as the accelerator: 2 CPU cores at ~50 GFLOP/s fp32 each.
CPU_FLOPS=1e11
SHARDS="$OUT/pipeline/shards"
step "5. compute budget: Chinchilla-optimal N and D for 10 minutes of this machine, as epochs of the demo's shards"
pretrain budget --gpus 1 --hours 0.17 --peak-flops "$CPU_FLOPS" --mfu 0.3 --data "$SHARDS"

step "6. the tiny model on these shards: Chinchilla's tokens are ~75 epochs of this tiny corpus, and repeated data stops paying after R_D* repeats (Muennighoff et al.): train for at most that many epochs"
pretrain budget --model tiny --data "$SHARDS" --method approach3
EPOCHS=$(pretrain budget --model tiny --data "$SHARDS" --method approach3 --json | python -c '
import json, sys
from pretrain.planning.data_constrained import R_D_STAR
print(round(min(json.load(sys.stdin)["data_constrained"]["chinchilla"]["epochs"], R_D_STAR)))')
echo "training for $EPOCHS epochs"

# The demo's run (tests/project/test_demo.py reads these two lines): the plan's shape, and validation on a
# tenth of the documents every 10 steps, keeping the best checkpoint and stopping once 3 in a row miss it;
# the demo's task (configs/eval/demo_cloze.yaml) scored every 30 steps and by `pretrain eval RUN`.
PLAN_SHAPE=(--seq-len 128 --micro-batch 8 --global-batch 16)
TRAIN_SETTINGS=(--set data.val_fraction=0.1 --set log.val_every_steps=10 --set log.val_batches=2 --set checkpoint.keep_best=true --set early_stop.patience=3 --set 'eval.tasks=[demo_cloze]' --set eval.include_path=configs/eval --set eval.every_steps=30)

step "7. plan: memory and layout for the tiny model here; writes the training config for $EPOCHS epochs"
pretrain plan tiny --gpus 1 --gpu cpu --peak-flops "$CPU_FLOPS" --precision fp32 "${PLAN_SHAPE[@]}" \
  --epochs "$EPOCHS" --data "$SHARDS" --run-dir "$OUT/train" --output "$OUT/train.yaml"

step "8. short CPU training run (the best checkpoint kept, early stop), its curves, and the model it hands over"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"  # tiny matrices: one thread is faster, and much faster on a busy machine
pretrain train "$OUT/train.yaml" "${TRAIN_SETTINGS[@]}"
pretrain plot "$OUT/train"
pretrain eval "$OUT/train"  # the best checkpoint: validation loss, bits per byte and the run's task

step "9. export for Hugging Face (with a model card), and the model's lineage back to the demo's WARC"
pretrain export "$OUT/train" --output "$OUT/hf"
pretrain lineage "$OUT/hf"

step "10. report"
dataprep report "$OUT/pipeline" --train-run "$OUT/train"

printf '\nDone. Cleaned corpus: %s/pipeline/corpus  shards: %s/pipeline/shards  model: %s/train (exported: %s/hf)  report: %s/pipeline/report/report.html\n' "$OUT" "$OUT" "$OUT" "$OUT" "$OUT"
printf 'The commands live in .venv: in a new shell, run `source .venv/bin/activate` here first (README.md).\n'
