#!/usr/bin/env bash
# Zero-bubble pipeline orders through the binary (Qi et al., "Zero Bubble
# Pipeline Parallelism", ICLR 2024; docs/LLM.md "Zero-bubble pipelines"):
# four uniform stages (one custom layer each, f = 100 us, and a backward of
# 3e9 FLOPs split into B = 200 us and W = 100 us, its forward's FLOPs) and
# 8 micro-batches on the unit cluster, costed by the roofline. Each GPU's
# simulated idle time per steady step, (1 - busy) x step, against the
# closed forms over the f, b, w the report's notes give:
#   1F1B (S-1)(f+b+w) = 1200 us, ZB-H1 (S-1)(f+b-w) = 600 us,
#   ZB-H2 (S-1)(f+b-2w) = 300 us,
# within 25 us (the transfers on the critical path, 1.1 us each); ZB-H2
# holds 2S - 1 = 7 micro-batches of activations on the last GPU where 1F1B
# holds one. Megatron and --sparsity refuse the orders.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$SRC/tests/cli/lib/common.sh"

field() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }

grep -q -- "zb-h1" <<<"$($STAGGER sim --help)" || fail "sim --help lacks zb-h1"

cat >"$tmp/uniform.json" <<'EOF'
{"name": "uniform4", "input": [250], "layers": [
 {"name": "in", "type": "custom", "params": 0, "fwd_flops": 0, "bwd_flops": 0,
  "activation_bytes": 0, "output_bytes": 1000},
 {"repeat": 4, "layers": [{"name": "l{i}", "type": "custom", "params": 1000000,
  "fwd_flops": 1000000000, "bwd_flops": 3000000000, "activation_bytes": 4000,
  "output_bytes": 1000}]}]}
EOF
RUN=(--model "$tmp/uniform.json" --cluster "$SRC/tests/data/engine/cluster.json" --gpus 4
     --strategy pipeline --pipeline-stages 4 --micro-batch 10 --global-batch 80
     --compute-model roofline)
for o in 1f1b zb-h1 zb-h2; do
  $STAGGER sim "${RUN[@]}" --pipeline-schedule "$o" --out "$tmp/$o" >/dev/null 2>&1 ||
    fail "sim --pipeline-schedule $o"
done

f=$(field "$tmp/zb-h1/report.json" "r['notes']['stage_fwd_estimate_s']")
b=$(field "$tmp/zb-h1/report.json" "r['notes']['stage_bwd_input_estimate_s']")
w=$(field "$tmp/zb-h1/report.json" "r['notes']['stage_bwd_weight_estimate_s']")
python3 -c "import sys; sys.exit(0 if abs($f - 1e-4) < 1e-7 and abs($b - 2e-4) < 1e-7 and abs($w - 1e-4) < 1e-7 else 1)" ||
  fail "stage times f $f, b $b, w $w: not 100, 200, 100 us"
declare -A want=([1f1b]="3 * ($f + $b + $w)" [zb-h1]="3 * ($f + $b - $w)"
                 [zb-h2]="max(0, 3 * ($f + $b - 2 * $w))")
for o in 1f1b zb-h1 zb-h2; do
  R=$tmp/$o/report.json
  [ "$(field "$R" "r['notes']['pipeline_schedule']")" = "$o" ] || fail "$o: note pipeline_schedule"
  for d in 0 1 2 3; do
    idle=$(field "$R" "(1 - r['devices'][$d]['busy_fraction']) * r['step_time_s']")
    python3 -c "import sys; sys.exit(0 if abs($idle - ${want[$o]}) < 25e-6 else 1)" ||
      fail "$o GPU $d idles $idle s per step, the closed form says $(python3 -c "print(${want[$o]})") s"
  done
  if [ "$o" != 1f1b ]; then
    est=$(field "$R" "r['notes']['bubble_estimate_s']")
    python3 -c "import sys; sys.exit(0 if abs($est - ${want[$o]}) < 1e-9 else 1)" ||
      fail "$o: bubble_estimate_s $est"
  fi
done

# Activations on the last GPU: 1F1B one micro-batch in flight, ZB-H2 seven.
acts() { field "$tmp/$1/report.json" "r['devices'][3]['peak_by_category']['activations']"; }
a1=$(acts 1f1b) a2=$(acts zb-h2)
python3 -c "import sys; sys.exit(0 if 7 * 40000 <= $a2 <= 7 * 40000 + 40000 and $a1 < 2 * 40000 + 40000 else 1)" ||
  fail "last GPU's activations: 1f1b $a1, zb-h2 $a2 bytes"

expect 1 "zero-bubble orders are the pipeline strategy's" $STAGGER sim \
  --model "$SRC/models/gpt2-124m.json" --cluster "$SRC/models/clusters/dgx-h100.json" \
  --strategy megatron --pipeline-stages 2 --pipeline-schedule zb-h1
expect 1 "built for dense models only" $STAGGER sim "${RUN[@]}" --pipeline-schedule zb-h2 \
  --sparsity 0.5
expect 2 "zb-h3" $STAGGER sim "${RUN[@]}" --pipeline-schedule zb-h3
echo ok
