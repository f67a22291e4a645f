#!/usr/bin/env bash
# stagger profile --import-kineto through the binary: a CPU trace made by
# Debian's python3-torch and a hand-written GPU-shaped one become profiles
# that stagger sim reads; bad usage and bad files say what is wrong.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
M=$SRC/models/mlp.json
C=$SRC/models/clusters/dgx-h100.json
D=$SRC/tests/data/kineto
source "$SRC/tests/cli/lib/common.sh"

grep -q -- "--import-kineto" <<<"$($STAGGER profile --help)" || fail "profile --help lacks --import-kineto"

# The GPU-shaped trace, named after the cluster's GPU; sim reads the result.
$STAGGER profile --import-kineto $D/gpu-shaped.json --model $M --cluster $C \
  --out "$tmp/gpu.json" >"$tmp/said"
grep -q "4 layer entries .* at batch 16, the optimizer step, 1 link entries, for mlp on H100-SXM" \
  "$tmp/said" || { cat "$tmp/said"; fail "import summary"; }
grep -q "relu1, relu2, fc3, loss" "$tmp/said" || fail "layers without ranges are not listed"
grep -q '"device":[[:space:]]*"H100-SXM"' "$tmp/gpu.json" || fail "entries are not for H100-SXM"
$STAGGER sim --model $M --cluster $C --gpus 1 --micro-batch 16 --profile "$tmp/gpu.json" \
  --out "$tmp/run" >/dev/null 2>&1
grep -q "profiled" "$tmp/run/report.json" || fail "the simulator did not use the imported entries"

# The CPU trace from Debian's torch (no shapes in it: --batch).
$STAGGER profile --import-kineto $D/mlp-cpu.json --model $M --batch 32 --out "$tmp/cpu.json" \
  >"$tmp/said"
grep -q "12 layer entries .* at batch 32, the optimizer step, 0 link entries, for mlp on host" \
  "$tmp/said" || { cat "$tmp/said"; fail "CPU import summary"; }

expect 2 "--model M and --out P are required" $STAGGER profile --import-kineto $D/mlp-cpu.json
expect 2 "--link" $STAGGER profile --import-kineto $D/mlp-cpu.json --model $M --out "$tmp/x" \
  --batch 32 --link ethernet
expect 1 "batch size is not in the trace" \
  $STAGGER profile --import-kineto $D/mlp-cpu.json --model $M --out "$tmp/x"
expect 1 "nothere.json" $STAGGER profile --import-kineto $D/nothere.json --model $M --out "$tmp/x"
# Traces that yield nothing are refused, not written as a profile of zeros
# (issue 23): every duration 0; kernels whose correlation ids match no
# launch; no range named as a layer. A stray kernel is counted and said.
if command -v jq >/dev/null; then
  jq '.traceEvents |= map(if .ph == "X" and .cat != "user_annotation" then .dur = 0 else . end)' \
    $D/gpu-shaped.json >"$tmp/zero.json"
  expect 1 "measures 0 us" $STAGGER profile --import-kineto "$tmp/zero.json" --model $M \
    --cluster $C --out "$tmp/x"
  jq '.traceEvents |= map(if .cat == "kernel" then .args.correlation += 1000 else . end)' \
    $D/gpu-shaped.json >"$tmp/orphans.json"
  expect 1 "none of the 12 GPU kernels' correlation ids matches" \
    $STAGGER profile --import-kineto "$tmp/orphans.json" --model $M --cluster $C --out "$tmp/x"
  jq '.traceEvents |= map(if .cat == "user_annotation" and (.name | test("^fc|^relu|^loss"))
                          then .name = "block_" + .name else . end)' \
    $D/gpu-shaped.json >"$tmp/unnamed.json"
  expect 1 "no range in the trace is named as a layer of model 'mlp'" \
    $STAGGER profile --import-kineto "$tmp/unnamed.json" --model $M --cluster $C --out "$tmp/x"
  [ ! -e "$tmp/x" ] || fail "a refused import wrote $tmp/x"
  jq '.traceEvents += [{"ph": "X", "cat": "kernel", "name": "stray", "pid": 0, "tid": 7,
                        "ts": 300, "dur": 5, "args": {"correlation": 999}}]' \
    $D/gpu-shaped.json >"$tmp/stray.json"
  $STAGGER profile --import-kineto "$tmp/stray.json" --model $M --cluster $C \
    --out "$tmp/stray-profile.json" >"$tmp/said"
  grep -q "correlation id matches no launch (given to no layer): 1" "$tmp/said" ||
    { cat "$tmp/said"; fail "the stray kernel is not reported"; }
fi
echo "cli kineto: ok"
