#!/usr/bin/env bash
# samo_figures.sh: re-runs, in simulation, the experiments of docs/SAMO.md
# (SAMO, Singh and Bhatele, IPDPS 2023, on Summit) and draws its figures.
#
#   plots/samo_figures.sh [STAGGER [OUT [IMG]]]
#     STAGGER  the binary (default: build/stagger)
#     OUT      where the runs and the tables go (default: runs/samo)
#     IMG      where the figures go (default: docs/img)
#
# Tables (CSV, one row per simulated run), then the figures drawn from them:
#   OUT/state_bytes.csv  model-state bytes per parameter against sparsity
#                        (the notes of dp schedules, mixed precision Adam)
#   OUT/gpt3.csv         GPT-3 1.3B-13B, pipeline strategy, strong scaling:
#                        dense, sparse at the dense stage count, sparse fitted
#   OUT/dp.csv           VGG-19 and WideResNet-101 in pure data parallelism
#   IMG/samo-state-bytes.png, samo-gpt3-scaling.png, samo-gpt3-memory.png,
#   samo-dp-scaling.png, samo-2.7b-memory.png (stagger plot's comparison)
# Every number is a simulation: roofline compute (no profile given) and
# alpha-beta links, as each report.json's cost_sources says.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
STAGGER=${1:-$SRC/build/stagger}
OUT=${2:-$SRC/runs/samo}
IMG=${3:-$SRC/docs/img}
SUMMIT=$SRC/models/clusters/summit.json
mkdir -p "$OUT" "$IMG"

# report FILE: one CSV fragment from a report.json (cJSON writes one key per
# line): step_s, samples_s, the worst GPU's peak and its categories at the
# peak (GiB), GPU 0's idle time per step (s), fits, and the notes asked for.
report() {
  awk -v notes="$2" '
    function val(line) { sub(/^[^:]*:[[:space:]]*/, "", line); sub(/,$/, "", line); return line }
    /"notes":/ { in_notes = 1 }
    in_notes && /^\t\t"/ { k = $1; gsub(/[":\t]/, "", k); note[k] = val($0) }
    in_notes && /^\t}/ { in_notes = 0 }
    /^\t"step_time_s":/ { step = val($0) }
    /^\t"samples_per_s":/ { sps = val($0) }
    /^\t"devices":/ { in_dev = 1 }
    in_dev && /"peak_bytes":/ { cur = val($0) }
    in_dev && /"at_peak_by_category":/ { in_at = 1; next }
    in_at && /"(params|grads|optimizer|activations|comm|workspace)":/ {
      k = $1; gsub(/[":\t]/, "", k); at[k] = val($0) }
    in_at && /}/ { in_at = 0
      if (cur + 0 > best + 0) { best = cur; for (k in at) worst[k] = at[k] } }
    in_dev && /"busy_fraction":/ && busy == "" { busy = val($0) }
    /^\t"total_peak_by_category":/ { in_dev = 0 }
    /^\t"out_of_memory":/ { fits = ($0 ~ /null/) ? "yes" : "no" }
    END {
      g = 2 ^ 30
      printf "%.6f,%.2f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.6f,%s", step, sps, best / g,
        worst["params"] / g, worst["grads"] / g, worst["optimizer"] / g,
        worst["activations"] / g, worst["workspace"] / g, (1 - busy) * step, fits
      n = split(notes, keys, " ")
      for (i = 1; i <= n; i++) printf ",%s", (keys[i] in note) ? note[keys[i]] : ""
      printf "\n"
    }' "$1"
}

# ---- 1. model-state bytes per parameter against p ------------------------------------
echo "sparsity,dense,sparse,breakeven" >"$OUT/state_bytes.csv"
for p in 0.01 0.05 0.1 0.15 0.2 0.25 0.3 0.35 0.4 0.45 0.5 0.55 0.6 0.65 0.7 0.75 0.8 \
         0.85 0.9 0.95 0.99; do
  "$STAGGER" sim --compute-model roofline --model "$SRC/models/mlp.json" --cluster "$SUMMIT" --gpus 1 --strategy dp \
    --precision mixed --optimizer adam --sparsity "$p" --out "$OUT/bytes" >/dev/null 2>&1
  report "$OUT/bytes/report.json" \
    "model_state_bytes_per_param_dense model_state_bytes_per_param sparse_breakeven" |
    awk -F, -v p="$p" '{ print p "," $11 "," $12 "," $13 }' >>"$OUT/state_bytes.csv"
done

# ---- 2. GPT-3 on Summit, pipeline strategy -------------------------------------------
# Strong scaling: the global batch is fixed per model (the largest GPU count
# of its row, one 2048-token sequence per micro-batch), mixed precision Adam,
# activation checkpointing, 1F1B. Dense and 90% sparse take the fewest stages
# that fit 16 GiB; "sparse-same" keeps the dense stage count, to separate
# what the compressed states and all-reduce give from what fewer stages give.
NOTES="pipeline_stages data_groups micro_batches bubble_fraction_estimate p2p_bytes_per_gpu \
allreduce_bytes_per_gpu memory_per_rank_estimate_bytes"
echo "model,gpus,variant,step_s,samples_s,peak_gib,params_gib,grads_gib,optimizer_gib,\
activations_gib,workspace_gib,idle_s,fits,stages,data_groups,micro_batches,bubble_estimate,\
p2p_bytes_per_gpu,allreduce_bytes_per_gpu,memory_estimate_bytes" >"$OUT/gpt3.csv"
gpt3() { # MODEL BATCH GPUS...
  local model=$1 batch=$2; shift 2
  for g in "$@"; do
    local nodes=$(((g + 5) / 6)) dir="$OUT/$model-$g"
    "$STAGGER" sim --compute-model roofline --model "$SRC/models/$model.json" --cluster "$SUMMIT" --nodes $nodes \
      --gpus "$g" --strategy pipeline,pipeline --sparsity 0,0.9 --precision mixed \
      --micro-batch 1 --global-batch "$batch" --recompute full --steps 2 --out "$dir" \
      >"$dir.txt" 2>/dev/null
    local stages
    stages=$(report "$dir/pipeline-sparsity0/report.json" pipeline_stages | awk -F, '{ print $11 }')
    "$STAGGER" sim --compute-model roofline --model "$SRC/models/$model.json" --cluster "$SUMMIT" --nodes $nodes \
      --gpus "$g" --strategy pipeline --sparsity 0.9 --pipeline-stages "$stages" \
      --precision mixed --micro-batch 1 --global-batch "$batch" --recompute full --steps 2 \
      --out "$dir/sparse-same" >/dev/null 2>&1
    for v in dense:pipeline-sparsity0 sparse-same:sparse-same sparse:pipeline-sparsity0.9; do
      echo "$model,$g,${v%%:*},$(report "$dir/${v#*:}/report.json" "$NOTES")" >>"$OUT/gpt3.csv"
    done
  done
}
gpt3 gpt3-1.3b 512 64 128 256 512
gpt3 gpt3-2.7b 1024 128 256 512 1024
gpt3 gpt3-6.7b 2048 256 512 1024 2048
gpt3 gpt3-13b 2048 512 1024 2048

# ---- 3. VGG-19 and WideResNet-101, pure data parallelism -----------------------------
# Global batch 1024 images (micro-batch 1024 / GPUs), mixed precision,
# momentum SGD as torchvision trains them; dense against 90% sparse.
echo "model,gpus,variant,step_s,samples_s,peak_gib,params_gib,grads_gib,optimizer_gib,\
activations_gib,workspace_gib,idle_s,fits,model_state_bytes_per_param" >"$OUT/dp.csv"
for model in vgg19 wide_resnet101_2; do
  for g in 8 16 32 64 128; do
    dir="$OUT/$model-$g"
    "$STAGGER" sim --compute-model roofline --model "$SRC/models/$model.json" --cluster "$SUMMIT" --nodes $(((g + 5) / 6)) \
      --gpus "$g" --strategy dp,dp --sparsity 0,0.9 --precision mixed --optimizer sgd \
      --micro-batch $((1024 / g)) --global-batch 1024 --steps 2 --out "$dir" >"$dir.txt" 2>/dev/null
    for v in dense:dp-sparsity0 sparse:dp-sparsity0.9; do
      echo "$model,$g,${v%%:*},$(report "$dir/${v#*:}/report.json" model_state_bytes_per_param)" \
        >>"$OUT/dp.csv"
    done
  done
done

# ---- figures ---------------------------------------------------------------------------
# Series files, one per line drawn (gnuplot breaks lines at filtered rows).
mkdir -p "$OUT/series"
awk -F, -v dir="$OUT/series" 'NR > 1 {
    f = dir "/" $1 "-" $3 ".csv"
    if (!(f in seen)) { print "gpus,step_s,stages" > f; seen[f] = 1 }
    print $2 "," $4 "," $14 >> f }' "$OUT/gpt3.csv"
awk -F, -v dir="$OUT/series" 'NR > 1 {
    f = dir "/dp-" $1 "-" $3 ".csv"
    if (!(f in seen)) { print "gpus,step_s" > f; seen[f] = 1 }
    print $2 "," $4 >> f }' "$OUT/dp.csv"
# The busiest GPU's memory at its peak, each model at its smallest GPU count.
awk -F, 'NR == 1 { print "run,params,grads,optimizer,activations,workspace"; next }
    !($1 in first) { first[$1] = $2 }
    $2 == first[$1] && $3 != "sparse-same" {
      printf "%s %s (%s),%s,%s,%s,%s,%s\n", $1, $3, $14, $7, $8, $9, $10, $11 }' \
  "$OUT/gpt3.csv" >"$OUT/series/memory.csv"
plot() { # SCRIPT OUTFILE VARS
  gnuplot -e "outfile='$2'; $3" "$SRC/plots/$1"
}
plot samo_state_bytes.gp "$IMG/samo-state-bytes.png" "datafile='$OUT/state_bytes.csv'"
plot samo_gpt3_scaling.gp "$IMG/samo-gpt3-scaling.png" "dir='$OUT/series'"
plot samo_gpt3_memory.gp "$IMG/samo-gpt3-memory.png" "dir='$OUT/series'"
plot samo_dp_scaling.gp "$IMG/samo-dp-scaling.png" "dir='$OUT/series'"
"$STAGGER" plot "$OUT/gpt3-2.7b-128" >/dev/null
cp "$OUT/gpt3-2.7b-128/compare_memory.png" "$IMG/samo-2.7b-memory.png"
echo "tables in $OUT; figures in $IMG"
