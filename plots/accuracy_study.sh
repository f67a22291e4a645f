#!/usr/bin/env bash
# accuracy_study.sh: trains one small model on a real data set (the UCI
# handwritten digits, tests/data/digits) with each parallelization the
# project models, for real on the host executor, and compares their loss
# and held-out accuracy against steps and against simulated wall time.
#
#   plots/accuracy_study.sh [STAGGER [OUT [IMG]]]
#     STAGGER  the binary (default: build/stagger)
#     OUT      where the runs and CSVs go (default: runs/accuracy)
#     IMG      where the figure goes (default: docs/img; "-": no figure)
#   Environment: STEPS (default 800), EVERY (held-out figures every EVERY
#   steps, 0: at the end only; default 50), SEED (default 1234), LR (3e-3).
#
# Every configuration runs the same model (tests/data/exec/digits-mlp.json),
# seed, global batch (4 ranks x 16 samples), optimizer (Adam, LR) and
# number of training steps, on the same samples in the same order:
#   dp, cdp-v1, cdp-v2, cdp-dp   cyclic DP's update rules (--update-rule)
#   samo-p0.5, samo-p0.8         dp on the model pruned by SAMO's fixed mask
#   burst                        DeepPool's per-layer GPU counts
#   multiplex                    burst foreground beside a background job
# Time axis: the end of step k in a simulation (`stagger sim`) of the same
# configuration on models/clusters/dgx-h100.json, 4 GPUs, estimated costs
# (no profile): what the step costs there, not on this CPU. The loss and
# accuracy are measured; the times are simulated.
#
# Writes OUT/NAME/ (the run), OUT/NAME.sim/ (its simulation), OUT/curves/
# NAME.csv (step, sim_time_ms, train_loss, heldout_loss, heldout_accuracy;
# held-out columns empty where not evaluated), OUT/final.csv (strategy,
# steps, heldout_loss, heldout_accuracy, sim_step_ms) and IMG/accuracy-digits.png.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
STAGGER=${1:-$SRC/build/stagger}
OUT=${2:-$SRC/runs/accuracy}
IMG=${3:-$SRC/docs/img}
STEPS=${STEPS:-800}
EVERY=${EVERY:-50}
SEED=${SEED:-1234}
LR=${LR:-3e-3}
DATA=$SRC/tests/data/digits/optdigits.tes.csv
MODEL=$SRC/tests/data/exec/digits-mlp.json
H100=$SRC/models/clusters/dgx-h100.json
rm -rf "$OUT"
mkdir -p "$OUT/curves"

# The configurations: NAME, then its strategy options.
CONFIGS=(
  "dp|--strategy dp"
  "cdp-v1|--strategy cdp --update-rule v1"
  "cdp-v2|--strategy cdp --update-rule v2"
  "cdp-dp|--strategy cdp --update-rule dp"
  "samo-p0.5|--strategy dp --sparsity 0.5"
  "samo-p0.8|--strategy dp --sparsity 0.8"
  "burst|--strategy burst"
  "multiplex|--strategy multiplex --foreground burst --background tiny-mlp:b16"
)
COMMON=(--model "$MODEL" --cluster "$H100" --gpus 4 --micro-batch 16)

echo "strategy,steps,heldout_loss,heldout_accuracy,sim_step_ms" >"$OUT/final.csv"
for c in "${CONFIGS[@]}"; do
  name=${c%%|*}
  read -r -a opts <<<"${c#*|}"
  steps=$STEPS
  # multiplex's foreground runs 3 steps before the multiplexed ones
  # (2 alone, 1 to start): ask for 3 fewer so it trains STEPS too.
  [ "$name" = multiplex ] && steps=$((STEPS - 3))
  every=()
  [ "$EVERY" -gt 0 ] && every=(--eval-every "$EVERY")
  "$STAGGER" run "${COMMON[@]}" "${opts[@]}" --steps "$steps" --backend host --data "$DATA" \
    --seed "$SEED" --lr "$LR" "${every[@]}" --out "$OUT/$name" >/dev/null 2>"$OUT/$name.log" ||
    { cat "$OUT/$name.log" >&2; exit 1; }
  "$STAGGER" sim "${COMMON[@]}" "${opts[@]}" --steps "$steps" --out "$OUT/$name.sim" \
    >/dev/null 2>>"$OUT/$name.log" || { cat "$OUT/$name.log" >&2; exit 1; }
  # One row per step: the measured losses, the simulated end of the step.
  jq -r '.step_end_s | .[] | . * 1000' "$OUT/$name.sim/report.json" >"$OUT/$name.times"
  awk -F, 'NR == FNR { t[FNR] = $1; next }
           FNR == 1 { print "step,sim_time_ms,train_loss,heldout_loss,heldout_accuracy"; next }
           { printf "%s,%s,%s,%s,%s\n", $1, t[$1], $2, $3, $4 }' \
    "$OUT/$name.times" "$OUT/$name/loss.csv" >"$OUT/curves/$name.csv"
  jq -r --arg n "$name" '.heldout[-1] as $h | [$n, $h.steps, $h.loss, $h.accuracy] | @csv' \
    "$OUT/$name/report.json" | tr -d '"' | tr '\n' ',' >>"$OUT/final.csv"
  jq -r '.step_time_s * 1000' "$OUT/$name.sim/report.json" >>"$OUT/final.csv"
done
column -s, -t "$OUT/final.csv"

if [ "$IMG" != "-" ]; then
  mkdir -p "$IMG"
  names=$(for c in "${CONFIGS[@]}"; do printf '%s ' "${c%%|*}"; done)
  gnuplot -e "dir='$OUT/curves'; names='$names'; outfile='$IMG/accuracy-digits.png'; steps=$STEPS" \
    "$SRC/plots/accuracy.gp"
  echo "wrote $IMG/accuracy-digits.png"
fi
