#!/usr/bin/env bash
# The planner refuses before building what its memory lower bound puts over
# the cap, and the cap applies to the device figure nvidia-smi shows
# (docs/FORMATS.md, plan.json's `estimate`): a rank's tensors plus its
# framework's CUDA context and cuBLAS workspace at least. So the bound adds
# them (`runtime_bytes`), and must stay a bound: every simulated point's
# device figure is at least its estimate plus them. A cap between the
# estimate alone and the estimate with them refuses the point unbuilt.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$SRC/tests/cli/lib/common.sh"
command -v jq >/dev/null || { echo "SKIP: jq is not installed"; exit 77; }

RUN=(--model "$SRC/models/gpt2-124m.json" --cluster "$SRC/models/clusters/dgx-h100.json"
     --nodes 1 --strategy dp,zero,pipeline,cdp --global-batch 64 --precision mixed --threads 1 -q)
$STAGGER plan "${RUN[@]}" --out "$tmp/wide" >/dev/null 2>&1
# 1. A bound: device figure >= estimate + runtime on every simulated point.
jq -e '[.points[] | select(.simulated and .estimate != null and .estimate.peak_bytes > 0)] |
       length > 0 and all(.device_bytes >= .estimate.peak_bytes + .estimate.runtime_bytes and
                          .device_bytes >= .estimate.device_bytes)' \
  "$tmp/wide/plan.json" >/dev/null || fail "a simulated point's device figure under its estimate + runtime"
# ... and so is, once built, the device figure of the schedule's bound (plan_floor.c).
jq -e '[.points[] | select(.simulated)] | length > 0 and
       all(.bound.device_bytes > .bound.peak_bytes and .device_bytes >= .bound.device_bytes)' \
  "$tmp/wide/plan.json" >/dev/null || fail "a simulated point's device figure under its bound's"
jq -e '[.points[] | select(.estimate != null) | .estimate.runtime_bytes] | min > 0' \
  "$tmp/wide/plan.json" >/dev/null || fail "no runtime bytes under pytorch or deepspeed"
# 2. The dp point of the fewest micro-batches: a cap halfway through its runtime bytes.
read -r est rt < <(jq -r '[.points[] | select(.strategy == "dp" and .estimate.peak_bytes > 0)] |
                   max_by(.estimate.peak_bytes) | "\(.estimate.peak_bytes) \(.estimate.runtime_bytes)"' \
                   "$tmp/wide/plan.json")
cap=$((est + rt / 2))
$STAGGER plan "${RUN[@]}" --strategy dp --mem-cap "${cap}B" --out "$tmp/capped" >/dev/null 2>&1 || true
jq -e --argjson est "$est" '[.points[] | select(.estimate.peak_bytes == $est)] | length > 0 and
       all(.simulated == false and (.reason | test("CUDA context")))' "$tmp/capped/plan.json" >/dev/null ||
  fail "a point whose estimate and runtime are over the cap was built, or not refused for it"
echo "ok"
