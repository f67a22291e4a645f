#!/usr/bin/env bash
# llm_figures.sh: re-runs, in simulation, the worked example of docs/LLM.md
# (Llama-3 70B on 8 DGX H100 nodes, 64 GPUs, with the `megatron` strategy)
# and the variants its table compares, and draws its figures.
#
#   plots/llm_figures.sh [STAGGER [OUT [IMG]]]
#     STAGGER  the binary (default: build/stagger)
#     OUT      where the runs and the table go (default: runs/llm)
#     IMG      where the figures go (default: docs/img)
#
# One `stagger sim` per subfolder of OUT, steps until steady (--steps auto),
# drawn by `stagger plot`; OUT/numbers.md is the table docs/LLM.md quotes.
# Every number is a simulation: the estimate compute model (no profile
# given) and the network model, as each report.json's cost_sources says.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
STAGGER=${1:-$SRC/build/stagger}
OUT=${2:-$SRC/runs/llm}
IMG=${3:-$SRC/docs/img}
rm -rf "$OUT"
mkdir -p "$OUT" "$IMG"

# run DIR ARGS...: one simulation into OUT/DIR.
run() {
  local dir=$1
  shift
  "$STAGGER" sim "$@" --out "$OUT/$dir" >/dev/null 2>"$OUT/log"
}

# row DIR: one markdown row from OUT/DIR/report.json (cJSON writes one key
# per line): step, samples/s, MFU by PaLM's count (6 N + 12 l d s FLOPs per
# token, N = 70.55e9, l = 80, d = 8192, s = 8192; 989 TFLOP/s per H100),
# GPU 0's peak and its activations, the bytes sent per step, GPU 0's
# exposed communication.
row() {
  awk -v name="$1" '
    function val(line) { sub(/^[^:]*:[[:space:]]*/, "", line); sub(/,$/, "", line); return line }
    /^\t"step_time_s":/ { step = val($0) }
    /^\t"samples_per_s":/ { sps = val($0) }
    /^\t"gpus_used":/ { gpus = val($0) }
    /^\t\t\t"peak_bytes":/ && peak == "" { peak = val($0) }
    /^\t\t\t"peak_by_category":/ && act == "" { in_dev = 1 }
    in_dev && /"activations":/ { act = val($0); in_dev = 0 }
    /^\t\t"bytes_total":/ { bytes = val($0) }
    /^\t\t"exposed_s":/ { exposed = val($0) }
    END {
      g = 2 ^ 30
      flops = 6 * 70.55e9 + 12 * 80 * 8192 * 8192
      mfu = sps * 8192 * flops / (gpus * 989e12)
      printf "| %s | %.2f | %.2f | %.0f %% | %.1f | %.1f | %.0f | %.2f |\n", name, step, sps,
        100 * mfu, peak / g, act / g, bytes / 2 ^ 40, exposed
    }' "$OUT/$1/report.json"
}

L70=(--model "$SRC/models/llama-3-70b.json" --cluster "$SRC/models/clusters/dgx-h100.json"
     --nodes 8 --strategy megatron --precision mixed --micro-batch 1 --global-batch 512)
# The worked example: issue 13's command, at bf16 with fp32 master weights,
# without its --recompute selective: Llama's flash attention keeps no
# scores, so selective would drop nothing (stagger refuses it).
run 1-tp8sp-pp4v2-dp2-zero1 "${L70[@]}" --tensor-parallel 8 --sequence-parallel \
  --pipeline-stages 4 --virtual-stages 2 --zero-stage 1
run 2-pp4-1f1b "${L70[@]}" --tensor-parallel 8 --sequence-parallel --pipeline-stages 4 \
  --zero-stage 1
run 3-no-sp "${L70[@]}" --tensor-parallel 8 --pipeline-stages 4 --virtual-stages 2 \
  --zero-stage 1
run 4-full-recompute "${L70[@]}" --tensor-parallel 8 --sequence-parallel \
  --pipeline-stages 4 --virtual-stages 2 --zero-stage 1 --recompute full
run 5-tp4-pp4v2-dp4 "${L70[@]}" --tensor-parallel 4 --sequence-parallel --pipeline-stages 4 \
  --virtual-stages 2 --zero-stage 1
run 6-tp8-pp8-dp1 "${L70[@]}" --tensor-parallel 8 --sequence-parallel --pipeline-stages 8 \
 

# The same layout over 16 micro-batches per pipeline (global batch 32), two
# steps: short enough for each group's traffic to be told apart in time.
run short "${L70[@]/512/32}" --tensor-parallel 8 --sequence-parallel --pipeline-stages 4 \
  --virtual-stages 2 --zero-stage 1 --steps 2

"$STAGGER" plot "$OUT/1-tp8sp-pp4v2-dp2-zero1" >/dev/null
"$STAGGER" plot "$OUT/short" >/dev/null
cp "$OUT/1-tp8sp-pp4v2-dp2-zero1/memory.png" "$IMG/llm-70b-memory.png"
cp "$OUT/short/groups.png" "$IMG/llm-70b-short-groups.png"

{
  echo "Llama-3 70B, 64 H100 (8 DGX nodes), micro-batch 1, global batch 512 x 8192 tokens,"
  echo "mixed precision; steady step from $(basename "$STAGGER") sim; regenerate with"
  echo "plots/llm_figures.sh."
  echo
  echo "| run | step (s) | samples/s | MFU | peak GPU 0 (GiB) | activations GPU 0 (GiB) | sent/step (TiB) | exposed comm GPU 0 (s) |"
  echo "|---|---|---|---|---|---|---|---|"
  for dir in 1-tp8sp-pp4v2-dp2-zero1 2-pp4-1f1b 3-no-sp 4-full-recompute 5-tp4-pp4v2-dp4 \
             6-tp8-pp8-dp1; do
    if grep -q '"out_of_memory":[[:space:]]*null' "$OUT/$dir/report.json"; then
      row "$dir"
    else
      echo "| $dir | out of memory | | | | | | |"
    fi
  done
} >"$OUT/numbers.md"
cat "$OUT/numbers.md"
