#!/usr/bin/env bash
# DualPipeV through the binary (DeepSeek-AI's DualPipe repository, README's
# table; DeepSeek-V3 technical report, arXiv 2412.19437; docs/LLM.md
# "Zero-bubble pipelines"): eight uniform chunks (one custom layer each,
# f = 100 us, a backward of 3e9 FLOPs split into B = 200 us and W = 100 us)
# on four GPUs, two chunks each in a V, and 8 micro-batches (2S), costed by
# the roofline. Each GPU's simulated idle time per steady step against the
# closed form (PP/2 - 1)(F&B + B - 3W) with F&B = f + b + w run as a pair
# here: (S - 1)(f + 2b - w) = 1200 us (over the f, b, w the report's notes
# give, which the runtime's launch costs move by nanoseconds), within the
# transfers on the critical
# path (at most 2 x 2M x 1.1 us); the report's notes give the same bubble.
# Fewer than 2S micro-batches, megatron and an unknown order are refused.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$SRC/tests/cli/lib/common.sh"

field() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }

grep -q -- "dualpipev" <<<"$($STAGGER sim --help)" || fail "sim --help lacks dualpipev"

cat >"$tmp/uniform.json" <<'JSON'
{"name": "uniform8", "input": [250], "layers": [
 {"name": "in", "type": "custom", "params": 0, "fwd_flops": 0, "bwd_flops": 0,
  "activation_bytes": 0, "output_bytes": 1000},
 {"repeat": 8, "layers": [{"name": "l{i}", "type": "custom", "params": 1000000,
  "fwd_flops": 1000000000, "bwd_flops": 3000000000, "activation_bytes": 4000,
  "output_bytes": 1000}]}]}
JSON
RUN=(--model "$tmp/uniform.json" --cluster "$SRC/tests/data/engine/cluster.json" --gpus 4
     --strategy pipeline --pipeline-stages 4 --micro-batch 10 --compute-model roofline)
$STAGGER sim "${RUN[@]}" --global-batch 80 --pipeline-schedule dualpipev --out "$tmp/v" \
  >/dev/null
R=$tmp/v/report.json
f=$(field "$R" "r['notes']['stage_fwd_estimate_s']")
b=$(field "$R" "r['notes']['stage_bwd_input_estimate_s']")
w=$(field "$R" "r['notes']['stage_bwd_weight_estimate_s']")
python3 -c "import sys; sys.exit(0 if abs($f - 100e-6) < 1e-6 and abs($b - 200e-6) < 1e-6 and abs($w - 100e-6) < 1e-6 else 1)" ||
  fail "chunk times f $f, b $b, w $w s; the model says 100, 200, 100 us"
want=$(python3 -c "print(3 * ($f + 2 * $b - $w))")
est=$(field "$R" "r['notes']['bubble_estimate_s']")
python3 -c "import sys; sys.exit(0 if abs($est - $want) < 1e-9 else 1)" ||
  fail "bubble_estimate_s $est, the closed form over the notes' f, b, w says $want"
for d in 0 1 2 3; do
  idle=$(field "$R" "(1 - r['devices'][$d]['busy_fraction']) * r['step_time_s']")
  python3 -c "import sys; sys.exit(0 if $want - 1e-6 <= $idle <= $want + 35.2e-6 else 1)" ||
    fail "GPU $d idles $idle s per step, the closed form says $want s"
done
[ "$(field "$R" "r['notes']['pipeline_schedule']")" = dualpipev ] || fail "the note lacks the order"

expect 1 "at least 2 x 4 stages = 8" $STAGGER sim "${RUN[@]}" --global-batch 40 \
  --pipeline-schedule dualpipev
expect 1 "as is dualpipev" $STAGGER sim --model "$SRC/models/gpt2-124m.json" \
  --cluster "$SRC/models/clusters/dgx-h100.json" --strategy megatron --pipeline-stages 2 \
  --pipeline-schedule dualpipev
expect 2 "dualpipe" $STAGGER sim "${RUN[@]}" --global-batch 80 --pipeline-schedule dualpipe
echo ok
