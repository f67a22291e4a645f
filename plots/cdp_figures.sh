#!/usr/bin/env bash
# cdp_figures.sh: re-runs, in simulation, the comparisons of docs/CDP.md
# (cyclic data parallelism against DP and ZeRO-DP) and draws its figures.
#
#   plots/cdp_figures.sh [STAGGER [OUT [IMG]]]
#     STAGGER  the binary (default: build/stagger)
#     OUT      where the runs and the table go (default: runs/cdp)
#     IMG      where the figures go (default: docs/img)
#
# Each comparison is a folder of runs (OUT/resnet50, OUT/gpt3, ...), one
# `stagger sim` per subfolder, drawn by `stagger plot` (compare_memory: one
# GPU's memory and the activations summed over all GPUs; compare_comm: the
# send rate over all GPUs). OUT/numbers.md is the table docs/CDP.md quotes.
# Every number is a simulation: roofline compute (no profile given) and
# alpha-beta links, as each report.json's cost_sources says.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
STAGGER=${1:-$SRC/build/stagger}
OUT=${2:-$SRC/runs/cdp}
IMG=${3:-$SRC/docs/img}
H100=$SRC/models/clusters/dgx-h100.json
rm -rf "$OUT"
mkdir -p "$OUT" "$IMG"

# run DIR ARGS...: one simulation into OUT/DIR.
run() {
  local dir=$1
  shift
  "$STAGGER" sim "$@" --compute-model roofline --out "$OUT/$dir" >/dev/null 2>"$OUT/log"
}

# row DIR: one markdown row from OUT/DIR/report.json (cJSON writes one key
# per line): GPUs, step, samples/s, the worst GPU's peak, activations summed
# over all GPUs at their peak, bytes sent per steady step, peak/mean of the
# send rate, and for model parallelism what DP with the same would need.
row() {
  awk -v name="$1" '
    function val(line) { sub(/^[^:]*:[[:space:]]*/, "", line); sub(/,$/, "", line); return line }
    /^\t"steps":|^\t\t"steps":/ { steps = val($0) }
    /^\t"warmup_steps":/ { warm = val($0) }
    /^\t"gpus_used":/ { gpus = val($0) }
    /^\t\t"gpus_dp_model_parallel":/ { dpmp = val($0) }
    /^\t"step_time_s":/ { step = val($0) }
    /^\t"samples_per_s":/ { sps = val($0) }
    /^\t\t\t"peak_bytes":/ { p = val($0); if (p + 0 > peak + 0) peak = p }
    /^\t"total_peak_by_category":/ { in_total = 1 }
    in_total && /"activations":/ { act = val($0); in_total = 0 }
    /^\t\t"bytes_total":/ { bytes = val($0) }
    /^\t\t"peak_to_mean":/ { ptm = val($0) }
    END {
      g = 2 ^ 30
      printf "| %s | %s%s | %.2f | %.1f | %.2f | %.1f | %.2f | %.2f |\n", name, gpus,
        dpmp != "" ? " (DP+MP: " dpmp ")" : "", step * 1e3, sps, peak / g, act / g,
        bytes / (steps - warm) / g, ptm
    }' "$OUT/$1/report.json"
}

table() { # TITLE DIR...
  echo
  echo "$1"
  echo
  printf "| run | GPUs | step (ms) | samples/s | peak/GPU (GiB) | activations, all GPUs (GiB)"
  echo " | sent/step (GiB) | send peak/mean |"
  echo "|---|---|---|---|---|---|---|---|"
  shift
  for dir in "$@"; do row "$dir"; done
}

# figures DIR PLOT...: the comparison plots of OUT/DIR ("memory" for
# compare_memory, "comm" for compare_comm) into IMG/cdp-DIR-PLOT.png.
figures() {
  local dir=$1
  shift
  "$STAGGER" plot "$OUT/$dir" >/dev/null
  for plot in "$@"; do
    cp "$OUT/$dir/compare_$plot.png" "$IMG/cdp-$dir-$plot.png"
  done
}

STEPS=8

# ---- 1. ResNet-50, 8 workers on one DGX H100, fp32, 4 stages by FLOPs ---------------
R50=(--model "$SRC/models/resnet50.json" --cluster "$H100" --ranks 8 --micro-batch 32
     --steps $STEPS --stages 4)
run resnet50/1-dp "${R50[@]}" --strategy dp
run resnet50/2-cdp-v1 "${R50[@]}" --strategy cdp --update-rule v1
run resnet50/3-cdp-v2 "${R50[@]}" --strategy cdp --update-rule v2
run resnet50/4-cdp-dp-rule "${R50[@]}" --strategy cdp --update-rule dp
figures resnet50 memory
cp "$OUT/resnet50/2-cdp-v1/gantt.png" "$IMG/cdp-resnet50-gantt.png"
# Gradient reduction: DP's bucketed all-reduce, CDP's chain, CDP's per-stage all-reduce.
run resnet50-reduce/1-dp "${R50[@]}" --strategy dp
run resnet50-reduce/2-cdp-chain "${R50[@]}" --strategy cdp --cdp-reduce chain
run resnet50-reduce/3-cdp-collective "${R50[@]}" --strategy cdp --cdp-reduce collective
figures resnet50-reduce comm
# Model parallelism: each stage on GPUs of its own (2 nodes of 8; DP+MP needs 4).
R50MP=("${R50[@]}" --nodes 4 --strategy cdp --model-parallel)
run resnet50-mp/1-cdp-v1-mp "${R50MP[@]}" --update-rule v1
run resnet50-mp/2-cdp-v2-mp "${R50MP[@]}" --update-rule v2
run resnet50-mp/3-dp-rule-mp "${R50MP[@]}" --update-rule dp

# ---- 2. GPT-3 2.7B, 8 workers on one DGX H100, mixed precision, 8 stages -------------
G27=(--model "$SRC/models/gpt3-2.7b.json" --cluster "$H100" --ranks 8 --micro-batch 1
     --precision mixed --steps $STEPS --stages 8)
run gpt3/1-dp "${G27[@]}" --strategy dp
run gpt3/2-cdp-v1 "${G27[@]}" --strategy cdp --update-rule v1
run gpt3/3-cdp-v2 "${G27[@]}" --strategy cdp --update-rule v2
figures gpt3 memory comm
run gpt3-zero/1-zero1 "${G27[@]}" --strategy zero --zero-stage 1
run gpt3-zero/2-cdp-zero1 "${G27[@]}" --strategy cdp --zero-stage 1
run gpt3-zero/3-zero3 "${G27[@]}" --strategy zero --zero-stage 3
run gpt3-zero/4-cdp-zero3 "${G27[@]}" --strategy cdp --zero-stage 3
figures gpt3-zero memory comm
G27MP=("${G27[@]}" --nodes 8 --strategy cdp --model-parallel)
run gpt3-mp/1-cdp-v1-mp "${G27MP[@]}" --update-rule v1
run gpt3-mp/2-dp-rule-mp "${G27MP[@]}" --update-rule dp

{
  echo "Steady state of steps 2-$STEPS (step 1 is the warm-up), from $(basename "$STAGGER") sim;"
  echo "regenerate with plots/cdp_figures.sh."
  table "ResNet-50, 8 workers, H100, fp32, micro-batch 32, 4 stages" resnet50/1-dp \
    resnet50/2-cdp-v1 resnet50/3-cdp-v2 resnet50/4-cdp-dp-rule resnet50-reduce/3-cdp-collective
  table "ResNet-50 with model parallelism (one rank per worker and stage)" \
    resnet50-mp/1-cdp-v1-mp resnet50-mp/2-cdp-v2-mp resnet50-mp/3-dp-rule-mp
  table "GPT-3 2.7B, 8 workers, H100, mixed precision, micro-batch 1, 8 stages" gpt3/1-dp \
    gpt3/2-cdp-v1 gpt3/3-cdp-v2 gpt3-zero/1-zero1 gpt3-zero/2-cdp-zero1 gpt3-zero/3-zero3 \
    gpt3-zero/4-cdp-zero3
  table "GPT-3 2.7B with model parallelism" gpt3-mp/1-cdp-v1-mp gpt3-mp/2-dp-rule-mp
} >"$OUT/numbers.md"
cat "$OUT/numbers.md"
