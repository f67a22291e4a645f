#!/usr/bin/env bash
# samo_figures.sh: re-runs, in simulation, the experiments of docs/SAMO.md
# (SAMO, Singh and Bhatele, IPDPS 2023, on Summit) on the paper's Table I,
# compares them with the paper's iteration times and draws the figures.
#
#   plots/samo_figures.sh [STAGGER [OUT [IMG]]]
#     STAGGER  the binary (default: build/stagger)
#     OUT      where the runs and the tables go (default: runs/samo)
#     IMG      where the figures go (default: docs/img)
#
# Table I, strong scaling (global batch fixed, GPU range where batch per GPU
# goes from 8 or 4 down to 1):
#   GPT-3 XL (1.3B) 512 @ 64-512, 2.7B 512 @ 64-512, 6.7B 1024 @ 128-1024,
#   13B 2048 @ 256-2048; VGG-19 and WideResNet-101 128 @ 16-128.
# The cluster: models/clusters/summit.json (6 V100-16GB per node, 2 EDR
# InfiniBand NICs per node). Every Table I count is a multiple of 16 and none
# of 6, so each run takes --gpus-per-node 4 on G/4 nodes: every node alike,
# 2 GPUs on each NIC (the first G GPUs of 6-GPU nodes would leave a partial
# last node whose busiest NIC slows every ring; OUT/dp.csv's "dense-first"
# rows keep that layout to show it).
# Dense (AxoNN) and sparse (SAMO) runs of a row take the same framework, so
# that the two differ only by --sparsity. The CNNs take --framework axonn
# (cost/framework_axonn.c: AxoNN's defaults read from its 2022 code: one
# all-reduce of its flat gradient buffer once a batch's passes end, eager
# PyTorch 1.x, torch.optim looping over the parameter tensors) in fp32,
# AxoNN's default precision (init's mixed_precision=False; its one CNN
# example, examples/test_vgg16.py, runs so), and again in mixed precision.
# The GPT-3 runs keep --framework ideal (fused kernels, no host overhead,
# 16-bit gradients, nothing held beyond tensors) with --overlap-grad-reduce
# off, AxoNN's reduction: axonn's runtime memory (the allocator's reserve,
# CUDA context, NCCL buffers) would change the stage counts the memory fit
# picks, which docs/SAMO.md compares with the paper's. Compute is the
# default estimate model (docs/VALIDATION.md).
#
# Tables (CSV, one row per simulated run), then the figures drawn from them:
#   OUT/state_bytes.csv  model-state bytes per parameter against sparsity
#                        (the notes of dp schedules, mixed precision Adam)
#   OUT/gpt3.csv         GPT-3 XL-13B, pipeline strategy, strong scaling:
#                        dense, sparse at the dense stage count, sparse fitted
#   OUT/dp.csv           VGG-19 and WideResNet-101 in pure data parallelism
#                        in fp32 (dense, sparse; dense-first: the first G
#                        GPUs; dense-mixed, sparse-mixed: mixed precision)
#   OUT/dp_ops.csv       GPU 0's time per op kind in those DP steps (ms)
#   OUT/compare.csv      the paper's iteration times against stagger's
#   OUT/compare.md       the same as the tables that open docs/SAMO.md
#   OUT/per_sample.csv   each series of compare.csv as per-sample and per-step costs
#   IMG/samo-state-bytes.png, samo-gpt3-scaling.png, samo-gpt3-memory.png,
#   samo-dp-scaling.png, samo-2.7b-memory.png (stagger plot's comparison)
# Every number is a simulation: estimated compute (no profile given) and
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

# balance FILE: GPU busy time, the mean over all GPUs over the busiest's: 1
# when every stage has as much to do, below where one stage paces the rest.
balance() {
  awk '/^\t"devices":/ { on = 1 }
    /^\t"total_peak_by_category":/ { on = 0 }
    on && /"busy_fraction":/ { v = $2 + 0; sum += v; n++; if (v > max) max = v }
    END { printf "%.3f", (n > 0 && max > 0) ? sum / n / max : 0 }' "$1"
}

# ---- 1. model-state bytes per parameter against p ------------------------------------
echo "sparsity,dense,sparse,breakeven" >"$OUT/state_bytes.csv"
for p in 0.01 0.05 0.1 0.15 0.2 0.25 0.3 0.35 0.4 0.45 0.5 0.55 0.6 0.65 0.7 0.75 0.8 \
         0.85 0.9 0.95 0.99; do
  "$STAGGER" sim --model "$SRC/models/mlp.json" --cluster "$SUMMIT" --gpus 1 --strategy dp \
    --precision mixed --optimizer adam --sparsity "$p" --out "$OUT/bytes" >/dev/null 2>&1
  report "$OUT/bytes/report.json" \
    "model_state_bytes_per_param_dense model_state_bytes_per_param sparse_breakeven" |
    awk -F, -v p="$p" '{ print p "," $11 "," $12 "," $13 }' >>"$OUT/state_bytes.csv"
done

# ---- 2. GPT-3 on Summit, pipeline strategy -------------------------------------------
# Table I's global batches (one 2048-token sequence per micro-batch), mixed
# precision Adam, activation checkpointing, 1F1B. Dense and 90% sparse take
# the fewest stages that fit 16 GiB; "sparse-same" keeps the dense stage
# count, to separate what the compressed states and all-reduce give from
# what fewer stages give.
AXONN="--framework ideal --overlap-grad-reduce off"
COMMON="--cluster $SUMMIT --gpus-per-node 4 $AXONN --precision mixed"
NOTES="pipeline_stages data_groups micro_batches bubble_fraction_estimate p2p_bytes_per_gpu \
allreduce_bytes_per_gpu memory_per_rank_estimate_bytes"
echo "model,gpus,variant,step_s,samples_s,peak_gib,params_gib,grads_gib,optimizer_gib,\
activations_gib,workspace_gib,idle_s,fits,stages,data_groups,micro_batches,bubble_estimate,\
p2p_bytes_per_gpu,allreduce_bytes_per_gpu,memory_estimate_bytes,busy_balance" >"$OUT/gpt3.csv"
gpt3() { # MODEL BATCH GPUS...
  local model=$1 batch=$2; shift 2
  for g in "$@"; do
    local dir="$OUT/$model-$g"
    # sparse-same is a run of its own inside this one's folder, which a
    # second sim would refuse to replace: the script owns OUT, start afresh
    rm -rf "$dir"
    # shellcheck disable=SC2086
    "$STAGGER" sim --model "$SRC/models/$model.json" $COMMON --nodes $((g / 4)) \
      --strategy pipeline,pipeline --sparsity 0,0.9 --micro-batch 1 --global-batch "$batch" \
      --recompute full --out "$dir" >"$dir.txt" 2>/dev/null
    local stages
    stages=$(report "$dir/pipeline-sparsity0/report.json" pipeline_stages | awk -F, '{ print $11 }')
    # shellcheck disable=SC2086
    "$STAGGER" sim --model "$SRC/models/$model.json" $COMMON --nodes $((g / 4)) \
      --strategy pipeline --sparsity 0.9 --pipeline-stages "$stages" --micro-batch 1 \
      --global-batch "$batch" --recompute full --out "$dir/sparse-same" >/dev/null 2>&1
    for v in dense:pipeline-sparsity0 sparse-same:sparse-same sparse:pipeline-sparsity0.9; do
      local r="$dir/${v#*:}/report.json"
      echo "$model,$g,${v%%:*},$(report "$r" "$NOTES"),$(balance "$r")" >>"$OUT/gpt3.csv"
    done
  done
}
gpt3 gpt3-1.3b 512 64 128 256 512
gpt3 gpt3-2.7b 512 64 128 256 512
gpt3 gpt3-6.7b 1024 128 256 512 1024
gpt3 gpt3-13b 2048 256 512 1024 2048

# The stage counts the paper's memory implies: its GPT-3 2.7B replica takes
# 80.16 GB dense and 20.28 GB with SAMO (abstract), which 16 GB GPUs hold on
# no fewer than 8 and 2 stages (the divisors of the GPU counts); the other
# models at the same bytes per parameter (30.2 dense, 7.6 sparse: an
# extrapolation). Rows "dense-paper" and "sparse-paper" in gpt3.csv.
# GPT-3 13B takes 8 stages dense and sparse: AxoNN gives every stage
# num_layers / G_inter transformer layers and asserts that they divide
# (axonn-ai/axonn, external/models/nvidia_transformer.py, DistributedGPT),
# and G_inter divides G (axonn/communication.py), so 13B's 40 layers on 256-2048
# GPUs take 1, 2, 4 or 8 stages, never the 32 its memory would ask. Dense,
# 8 stages hold the states only with init(cpu_offload=True) (fp32 weights and
# Adam on the host: 4 bytes per parameter on the GPU), which stagger's
# pipeline does not model: that run reports out of memory, and its step
# leaves the host optimizer out.
gpt3_paper() { # MODEL BATCH DENSE_STAGES SPARSE_STAGES GPUS...
  local model=$1 batch=$2 ds=$3 ss=$4; shift 4
  for g in "$@"; do
    for v in dense:0:$ds sparse:0.9:$ss; do
      IFS=: read -r name p stages <<<"$v"
      local dir="$OUT/$model-$g-paper/$name"
      # shellcheck disable=SC2086
      "$STAGGER" sim --model "$SRC/models/$model.json" $COMMON --nodes $((g / 4)) \
        --strategy pipeline --sparsity "$p" --pipeline-stages "$stages" --micro-batch 1 \
        --global-batch "$batch" --recompute full --out "$dir" >/dev/null 2>&1
      echo "$model,$g,$name-paper,$(report "$dir/report.json" "$NOTES"),$(balance "$dir/report.json")" \
        >>"$OUT/gpt3.csv"
    done
  done
}
gpt3_paper gpt3-1.3b 512 4 1 64 128 256 512
gpt3_paper gpt3-2.7b 512 8 2 64 128 256 512
gpt3_paper gpt3-6.7b 1024 16 4 128 256 512 1024
gpt3_paper gpt3-13b 2048 8 8 256 512 1024 2048

# ---- 3. VGG-19 and WideResNet-101, pure data parallelism -----------------------------
# Table I's global batch of 128 images (micro-batch 128 / GPUs), AdamW (AxoNN's
# one CNN script trains with torch.optim.AdamW, examples/test_vgg16.py:32;
# SAMO's optimizer, PruningAwareAdam on the grad-norm branch, wraps it,
# axonn/optim.py:73; the paper counts Adam's states), under --framework
# axonn; dense against 90% sparse. In fp32, AxoNN's default precision (init's mixed_precision=False,
# as its examples/test_vgg16.py runs), which the paper's per-image cost
# matches (docs/SAMO.md, "VGG-19 and WideResNet-101"); again in mixed
# precision (dense-mixed, sparse-mixed). dense-first: the first G GPUs of
# ceil(G/6) whole nodes (--gpus G), the layout --gpus-per-node replaces.
# ops MODEL G VARIANT DIR: GPU 0's time per op kind in its reported step (ms).
ops() {
  awk -F, -v pre="$1,$2,$3" 'NR > 1 && $1 == 0 { row[NR] = $0; if ($6 > last) last = $6 }
    END {
      for (r in row) {
        split(row[r], f, ",")
        if (f[6] != last) continue
        k = f[8] == "COMP" ? f[9] : f[8] == "COMM_COLL" ? "allreduce" : "other"
        t[k] += f[18] / 1000
      }
      printf "%s,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f\n", pre, t["fwd"], t["bwd"], t["allreduce"],
        t["optim"], t["compress"] + t["expand"], t["other"] }' "$4/ops.csv"
}
echo "model,gpus,variant,step_s,samples_s,peak_gib,params_gib,grads_gib,optimizer_gib,\
activations_gib,workspace_gib,idle_s,fits,model_state_bytes_per_param" >"$OUT/dp.csv"
echo "model,gpus,variant,fwd_ms,bwd_ms,allreduce_ms,optim_ms,compress_expand_ms,other_ms" \
  >"$OUT/dp_ops.csv"
dp() { # MODEL G TAG PRECISION LAYOUT...: dense and sparse in OUT/MODEL-G[-TAG]
  local model=$1 g=$2 tag=$3 precision=$4; shift 4
  local dir="$OUT/$model-$g${tag:+-$tag}"
  # shellcheck disable=SC2086
  "$STAGGER" sim --model "$SRC/models/$model.json" --cluster "$SUMMIT" "$@" $AXONN_DP \
    --strategy dp,dp --sparsity 0,0.9 --precision "$precision" \
    --optimizer adam --micro-batch $((128 / g)) --global-batch 128 --out "$dir" \
    >"$dir.txt" 2>/dev/null
  for v in dense:dp-sparsity0 sparse:dp-sparsity0.9; do
    local name=${v%%:*}${tag:+-$tag}
    echo "$model,$g,$name,$(report "$dir/${v#*:}/report.json" model_state_bytes_per_param)" \
      >>"$OUT/dp.csv"
    ops "$model" "$g" "$name" "$dir/${v#*:}" >>"$OUT/dp_ops.csv"
  done
}
AXONN_DP="--framework axonn"
for model in vgg19 wide_resnet101_2; do
  for g in 16 32 64 128; do
    dp $model $g "" fp32 --gpus-per-node 4 --nodes $((g / 4))
    dp $model $g first fp32 --nodes $(((g + 5) / 6)) --gpus $g
  done
done
for model in vgg19 wide_resnet101_2; do
  for g in 16 32 64 128; do
    dp $model $g mixed mixed --gpus-per-node 4 --nodes $((g / 4))
  done
done
# Only the dense run of the first-G layout is kept.
awk -F, '$3 != "sparse-first"' "$OUT/dp.csv" >"$OUT/dp.tmp" && mv "$OUT/dp.tmp" "$OUT/dp.csv"
awk -F, '$3 != "sparse-first"' "$OUT/dp_ops.csv" >"$OUT/dp.tmp" && mv "$OUT/dp.tmp" "$OUT/dp_ops.csv"

# ---- 4. against the paper -------------------------------------------------------------
# The paper's iteration times (s), read from its Figs. 5-7 (+-10 %): AxoNN,
# the dense baseline, and AxoNN with SAMO at 90 % sparsity.
cat >"$OUT/paper.csv" <<'PAPER'
model,gpus,axonn_s,samo_s
vgg19,16,0.175,0.144
vgg19,32,0.122,0.070
vgg19,64,0.076,0.050
vgg19,128,0.070,0.039
wide_resnet101_2,16,0.231,0.215
wide_resnet101_2,32,0.171,0.146
wide_resnet101_2,64,0.149,0.132
wide_resnet101_2,128,0.142,0.128
gpt3-1.3b,64,4.2,3.7
gpt3-1.3b,128,2.4,1.9
gpt3-1.3b,256,1.6,1.05
gpt3-1.3b,512,1.19,0.63
gpt3-2.7b,64,8.6,7.6
gpt3-2.7b,128,5.1,4.1
gpt3-2.7b,256,3.2,2.4
gpt3-2.7b,512,2.25,1.47
gpt3-6.7b,128,16.6,14.7
gpt3-6.7b,256,9.7,8.1
gpt3-6.7b,512,6.2,4.9
gpt3-6.7b,1024,4.2,3.25
gpt3-13b,256,26.5,21.4
gpt3-13b,512,14.3,11.7
gpt3-13b,1024,8.9,7.0
gpt3-13b,2048,6.2,4.6
PAPER
# compare.csv: per configuration and row of the paper, the paper's and
# stagger's dense and sparse step, the differences (%) and the speed-ups (%
# of the dense time saved, as the paper's annotations count them).
# Configurations: "fitted" (the runs above: stages fitted by stagger, CNNs
# in fp32), "mixed" (the CNNs in mixed precision), "paper stages" (GPT-3 on
# the stage counts the paper's memory implies).
awk -F, 'FNR == 1 { next }
  FILENAME ~ /paper/ { key = $1 "," $2; order[++n] = key; ax[key] = $3; sa[key] = $4; next }
  { key = $1 "," $2; v = $3; cfg = "fitted" }
  v ~ /-mixed$/ { cfg = "mixed"; sub(/-mixed$/, "", v) }
  v ~ /-paper$/ { cfg = "paper stages"; sub(/-paper$/, "", v) }
  v == "dense" { d[cfg, key] = $4; has[cfg, key] = 1 }
  v == "sparse" { s[cfg, key] = $4 }
  END {
    print "model,gpus,config,paper_axonn_s,stagger_dense_s,dense_diff_pct,paper_samo_s," \
          "stagger_sparse_s,sparse_diff_pct,paper_saving_pct,stagger_saving_pct"
    split("fitted,mixed,paper stages", cfgs, ",")
    for (c = 1; c <= 3; c++)
      for (i = 1; i <= n; i++) {
        k = order[i]; x = cfgs[c] SUBSEP k
        if (!(x in has)) continue
        printf "%s,%s,%s,%.4f,%+.1f,%s,%.4f,%+.1f,%.1f,%.1f\n", k, cfgs[c], ax[k], d[x],
          100 * (d[x] / ax[k] - 1), sa[k], s[x], 100 * (s[x] / sa[k] - 1),
          100 * (1 - sa[k] / ax[k]), 100 * (1 - s[x] / d[x])
      }
  }' "$OUT/paper.csv" "$OUT/dp.csv" "$OUT/gpt3.csv" >"$OUT/compare.csv"
# compare.md: the tables of docs/SAMO.md, the fitted runs first (the one
# that opens the page), then the other configurations. A difference within
# 25 % is a match; past it, the cause docs/SAMO.md measures (its section).
awk -F, 'NR == 1 { next }
  function verdict(pct, cause) { return (pct < -25 || pct > 25) ? "differs: " cause : "match" }
  BEGIN {
    name["gpt3-1.3b"] = "GPT-3 XL"; name["gpt3-2.7b"] = "GPT-3 2.7B"
    name["gpt3-6.7b"] = "GPT-3 6.7B"; name["gpt3-13b"] = "GPT-3 13B"
    name["vgg19"] = "VGG-19"; name["wide_resnet101_2"] = "WRN-101"
    why["vgg19"] = why["wide_resnet101_2"] = "[per-step cost](#vgg-19-and-wideresnet-101)"
    whymixed = "[precision](#vgg-19-and-wideresnet-101)"
    why["gpt3-1.3b"] = why["gpt3-2.7b"] = "[stages](#gpt-3-stage-counts)"
    why["gpt3-6.7b"] = why["gpt3-13b"] = "[stage balance](#gpt-3-stage-balance)"
  }
  $3 != config {
    config = $3
    printf "\n**%s**\n\n", config == "fitted" ? "As run (GPT-3: stages fitted by stagger, mixed precision; the CNNs in fp32, AxoNN'"'"'s default)" : \
      config == "mixed" ? "The CNNs in mixed precision" : \
      "GPT-3 on the stage counts the paper'"'"'s memory implies"
    print "| model | GPUs | paper AxoNN | stagger dense | | paper SAMO | stagger sparse | | saved: paper / stagger | command |"
    print "|---|---:|---:|---:|---|---:|---:|---|---:|---|"
  }
  { gpt = $1 ~ /^gpt/; u = gpt ? 1 : 1000; us = gpt ? " s" : " ms"
    c = gpt ? (config == "fitted" ? "[gpt](#cmd-gpt)" : "[gpt, stages](#cmd-gpt-stages)") : \
      (config == "fitted" ? "[dp](#cmd-dp)" : "[dp, mixed](#cmd-dp)")
    cause = config == "mixed" ? whymixed : why[$1]
    printf "| %s | %d | %.3g%s | %.3g%s (%+.0f %%) | %s | %.3g%s | %.3g%s (%+.0f %%) | %s | %.0f / %.0f %% | %s |\n",
      name[$1], $2, $4 * u, us, $5 * u, us, $6, verdict($6, cause), $7 * u, us, $8 * u, us,
      $9, verdict($9, cause), $10, $11, c }' "$OUT/compare.csv" >"$OUT/compare.md"

# per_sample.csv: each series of compare.csv fitted, over its four GPU counts,
# as step = per_sample x (global batch / GPUs) + per_step (least squares):
# per_sample is one sample's passes through the whole model (s), per_step
# what a step pays whatever its batch per GPU (the bubble of a fixed stage
# count, the all-reduce, the optimizer, fixed overheads). A lens on where
# two series differ, not a model of either.
awk -F, 'NR == 1 { next }
  { b = $1 ~ /^gpt3-(1.3b|2.7b)$/ ? 512 : $1 == "gpt3-6.7b" ? 1024 : $1 == "gpt3-13b" ? 2048 : 128
    k = $1 "," $3; if (!(k in n)) order[++m] = k
    x = b / $2; n[k]++; sx[k] += x; sxx[k] += x * x
    for (c = 1; c <= 4; c++) { y = $(c == 1 ? 4 : c == 2 ? 5 : c == 3 ? 7 : 8)
      sy[k, c] += y; sxy[k, c] += x * y } }
  END {
    print "model,config,paper_axonn_per_sample,paper_axonn_per_step,stagger_dense_per_sample," \
          "stagger_dense_per_step,paper_samo_per_sample,paper_samo_per_step," \
          "stagger_sparse_per_sample,stagger_sparse_per_step"
    for (i = 1; i <= m; i++) {
      k = order[i]; d = n[k] * sxx[k] - sx[k] * sx[k]; printf "%s", k
      for (c = 1; c <= 4; c++) {
        a = (n[k] * sxy[k, c] - sx[k] * sy[k, c]) / d
        printf ",%.4f,%.4f", a, (sy[k, c] - a * sx[k]) / n[k]
      }
      printf "\n"
    } }' "$OUT/compare.csv" >"$OUT/per_sample.csv"

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
awk -F, -v dir="$OUT/series" 'NR > 1 {
    for (v = 1; v <= 2; v++) {
      f = dir "/paper-" $1 "-" (v == 1 ? "axonn" : "samo") ".csv"
      if (!(f in seen)) { print "gpus,step_s" > f; seen[f] = 1 }
      print $2 "," $(2 + v) >> f } }' "$OUT/paper.csv"
# The busiest GPU's memory at its peak, each model at its smallest GPU count.
awk -F, 'NR == 1 { print "run,params,grads,optimizer,activations,workspace"; next }
    !($1 in first) { first[$1] = $2 }
    $2 == first[$1] && ($3 == "dense" || $3 == "sparse") {
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
