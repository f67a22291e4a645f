#!/usr/bin/env bash
# stagger calibrate through the binary (docs/VALIDATION.md, "Calibration"):
# runs simulated with known factors and calibrated back recover those
# factors, with a leave-one-out error of nothing; the calibration file it
# writes is what sim reads, and its residuals give report.json's intervals;
# --check fails on a held-out run outside its limits; bad input is refused.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v jq >/dev/null || { echo "SKIP: jq is not installed"; exit 77; }
M=$SRC/models
C=$M/clusters

expect() { # CODE PATTERN COMMAND...: exit code and a pattern on stderr
  local code=$1 pattern=$2; shift 2
  set +e; "$@" >"$tmp/out" 2>"$tmp/err"; local got=$?; set -e
  [ "$got" -eq "$code" ] || { cat "$tmp/err" >&2; fail "exit $got, wanted $code: $*"; }
  grep -q -- "$pattern" "$tmp/err" || { cat "$tmp/err" >&2; fail "stderr lacks '$pattern'"; }
}

# 1. The truth: GEMMs at 0.85 and the network at 0.70 of what the files say.
cat >"$tmp/truth.json" <<'EOF'
{"format": "stagger-calibration", "version": 1, "parameters": {"gemm": 0.85, "network": 0.7}}
EOF
# Six runs that lean on the two differently: compute alone in a node, data
# parallelism over nodes (the network), ZeRO-3, a CNN, tensor parallelism.
cases=(
  "a|$M/gpt2-124m.json|$C/dgx-h100.json|dp|--gpus 8 --precision mixed --micro-batch 8"
  "b|$M/gpt2-124m.json|$C/dgx-h100.json|dp|--nodes 4 --precision mixed --micro-batch 4"
  "c|$M/resnet18.json|$C/dgx-a100.json|dp|--nodes 2 --precision mixed --micro-batch 64"
  "d|$M/gpt2-124m.json|$C/dgx-a100.json|zero|--nodes 2 --zero-stage 3 --precision mixed --micro-batch 8"
  "e|$M/resnet18.json|$C/dgx-h100.json|dp|--gpus 8 --precision mixed --micro-batch 128"
  "f|$M/gpt3-1.3b.json|$C/dgx-h100.json|megatron|--nodes 2 --tensor-parallel 8 --precision mixed --micro-batch 1 --global-batch 16"
)
runs='[]'
for c in "${cases[@]}"; do
  IFS='|' read -r id model cluster strategy opts <<<"$c"
  # shellcheck disable=SC2086
  $STAGGER sim --model "$model" --cluster "$cluster" --strategy "$strategy" $opts \
    --calibration "$tmp/truth.json" --out "$tmp/sim-$id" >/dev/null 2>&1
  step=$(jq .step_time_s "$tmp/sim-$id/report.json")
  # The options as a JSON object: "--name value" pairs.
  options=$(awk '{ printf "{"; for (i = 1; i < NF; i += 2) printf "%s\"%s\": \"%s\"", (i > 1 ? ", " : ""), substr($i, 3), $(i + 1); printf "}" }' <<<"$opts")
  set=calibration
  [ "$id" = f ] && set=held-out
  runs=$(jq --arg id "$id" --arg set "$set" --arg m "$model" --arg c "$cluster" \
    --arg s "$strategy" --argjson o "$options" --argjson t "$step" \
    '. + [{id: $id, set: $set, model: $m, cluster: $c, strategy: $s, options: $o,
           measured: {step_time_s: $t}}]' <<<"$runs")
done
jq -n --argjson r "$runs" '{format: "stagger-runs", version: 1, runs: $r}' >"$tmp/runs.json"

# 2. Calibrated back from the published numbers (factors 1): the truth again.
$STAGGER calibrate --runs "$tmp/runs.json" --fit gemm,network --out "$tmp/fit.json" \
  >"$tmp/table" 2>"$tmp/err" || { cat "$tmp/err"; fail "calibrate failed"; }
cat "$tmp/table"
for p in gemm:0.85 network:0.7; do
  got=$(jq ".parameters.${p%%:*}" "$tmp/fit.json")
  awk -v g="$got" -v w="${p#*:}" 'BEGIN { exit !(g / w - 1 < 0.01 && w / g - 1 < 0.01) }' \
    || fail "${p%%:*}: fitted $got, the truth is ${p#*:}"
done
grep -q "leave-one-out" "$tmp/table" || fail "no leave-one-out error printed"
# Every run, left out, is predicted within 1 % (the truth explains them all).
awk '$2 == "calibration" && $7 ~ /%$/ { e = $7; sub(/%/, "", e); if (e < 0) e = -e; if (e > 1) bad = 1; n++ }
     END { exit bad || n != 5 }' "$tmp/table" || fail "a leave-one-out error above 1 %"
[ "$(jq '.fitted_on.ids | length' "$tmp/fit.json")" = 5 ] || fail "fitted_on.ids: not the 5 calibration runs"
jq -e '.fitted_on.ids | index("f") == null' "$tmp/fit.json" >/dev/null || fail "the held-out run was fitted"

# 3. The file drives sim: the same step as the truth's.
$STAGGER sim --model "$M/gpt3-1.3b.json" --cluster "$C/dgx-h100.json" --strategy megatron \
  --nodes 2 --tensor-parallel 8 --precision mixed --micro-batch 1 --global-batch 16 \
  --calibration "$tmp/fit.json" --out "$tmp/again" >/dev/null 2>"$tmp/err"
grep -q "calibration: $tmp/fit.json (gemm x0.850, network x0.700)" "$tmp/err" \
  || { cat "$tmp/err"; fail "sim does not say which calibration applies"; }
awk -v a="$(jq .step_time_s "$tmp/again/report.json")" -v b="$(jq .step_time_s "$tmp/sim-f/report.json")" \
  'BEGIN { exit !(a / b - 1 < 1e-3 && b / a - 1 < 1e-3) }' || fail "sim with the fitted file differs"

# 4. Residuals become intervals: ln(measured/predicted) of mean 0, sd 0.1
#    gives x e^(+-1.645 x 0.1) = x 0.8484 .. x 1.1787.
cat >"$tmp/spread.json" <<'EOF'
{"format": "stagger-calibration", "version": 1, "parameters": {},
 "step_time": {"n": 20, "mean": 0, "sd": 0.1}, "memory": {"n": 8, "mean": 0, "sd": 0.05}}
EOF
$STAGGER sim --model "$M/gpt2-124m.json" --cluster "$C/dgx-h100.json" --gpus 8 \
  --precision mixed --micro-batch 8 --calibration "$tmp/spread.json" --out "$tmp/iv" \
  >"$tmp/iv.table" 2>/dev/null
r=$tmp/iv/report.json
jq -e '(.step_time_interval_s[0] / .step_time_s - 0.84839 | fabs) < 1e-4 and
       (.step_time_interval_s[1] / .step_time_s - 1.17872 | fabs) < 1e-4' "$r" >/dev/null \
  || fail "step_time_interval_s is not x0.8484 .. x1.1787"
jq -e '.memory_peak.interval.device[1] / .memory_peak.device - 1.0857 | fabs < 1e-3' "$r" \
  >/dev/null || fail "the memory interval is not x1.0857 at its top"
grep -q "90 %)" "$tmp/iv.table" || fail "the table shows no interval"
# None: no calibration, no interval.
$STAGGER sim --model "$M/gpt2-124m.json" --cluster "$C/dgx-h100.json" --gpus 8 \
  --precision mixed --micro-batch 8 --calibration none --out "$tmp/none" >/dev/null 2>&1
jq -e 'has("step_time_interval_s") | not' "$tmp/none/report.json" >/dev/null \
  || fail "an interval without a calibration"

# 5. --check: the held-out run predicted from published numbers alone is off
#    by the truth's factors; a 1 % limit fails, a wide one passes.
expect 1 "held-out runs: step MAPE" $STAGGER calibrate --runs "$tmp/runs.json" --fit none \
  --calibration none --check 1,1
$STAGGER calibrate --runs "$tmp/runs.json" --fit none --calibration "$tmp/fit.json" \
  --check 1,1 >/dev/null 2>&1 || fail "--check fails on the fitted calibration"

# 6. A factor scoped to one GPU (NAME@GPU): GEMMs at 0.8 on the H100s only.
#    Calibrated back, the H100's factor is the truth and the A100's stays 1.
cat >"$tmp/truth2.json" <<'EOF'
{"format": "stagger-calibration", "version": 1, "parameters": {"gemm@H100-SXM": 0.8}}
EOF
steps='{}'
for c in "${cases[@]}"; do
  IFS='|' read -r id model cluster strategy opts <<<"$c"
  # shellcheck disable=SC2086
  $STAGGER sim --model "$model" --cluster "$cluster" --strategy "$strategy" $opts \
    --calibration "$tmp/truth2.json" --out "$tmp/sim2-$id" >/dev/null 2>&1
  steps=$(jq --arg id "$id" --argjson t "$(jq .step_time_s "$tmp/sim2-$id/report.json")" \
    '. + {($id): $t}' <<<"$steps")
done
jq --argjson s "$steps" '.runs |= map(.measured.step_time_s = $s[.id])' "$tmp/runs.json" \
  >"$tmp/runs2.json"
# An A100 run (c) is simulated under the truth as under the published numbers.
IFS='|' read -r id model cluster strategy opts <<<"${cases[2]}"
# shellcheck disable=SC2086
$STAGGER sim --model "$model" --cluster "$cluster" --strategy "$strategy" $opts \
  --calibration none --out "$tmp/sim0-c" >/dev/null 2>&1
awk -v a="$(jq .step_time_s "$tmp/sim2-c/report.json")" -v b="$(jq .step_time_s "$tmp/sim0-c/report.json")" \
  'BEGIN { exit !(a == b) }' || fail "gemm@H100-SXM moved an A100 run"
$STAGGER calibrate --runs "$tmp/runs2.json" --fit gemm@H100-SXM,gemm@A100-SXM4 \
  --out "$tmp/fit2.json" >"$tmp/table2" 2>"$tmp/err" || { cat "$tmp/err"; fail "scoped fit failed"; }
for p in gemm@H100-SXM:0.8 gemm@A100-SXM4:1; do
  got=$(jq --arg k "${p%%:*}" '.parameters[$k]' "$tmp/fit2.json")
  awk -v g="$got" -v w="${p#*:}" 'BEGIN { exit !(g / w - 1 < 0.01 && w / g - 1 < 0.01) }' \
    || fail "${p%%:*}: fitted $got, the truth is ${p#*:}"
done
grep -q "gemm@H100-SXM x0.8" "$tmp/table2" || { cat "$tmp/table2"; fail "the table does not name the scoped factor"; }

# 7. Bad input.
expect 2 "unknown parameter 'gemmm'" $STAGGER calibrate --runs "$tmp/runs.json" --fit gemmm
expect 2 "'gemm' is listed twice" $STAGGER calibrate --runs "$tmp/runs.json" --fit gemm,gemm
expect 2 "unknown parameter 'gemm@'" $STAGGER calibrate --runs "$tmp/runs.json" --fit gemm@
expect 2 "unknown parameter 'gemmm@H100-SXM'" $STAGGER calibrate --runs "$tmp/runs.json" --fit gemmm@H100-SXM
expect 2 "--runs FILE is required" $STAGGER calibrate
# Where it will write is checked before the fit, not after it.
expect 2 "--markdown $tmp/nope/x.md: there is no folder" \
  $STAGGER calibrate --runs "$tmp/runs.json" --markdown "$tmp/nope/x.md"
expect 2 "--out $tmp: a folder, not a file" $STAGGER calibrate --runs "$tmp/runs.json" --out "$tmp"
jq '.runs[0].measured = {}' "$tmp/runs.json" >"$tmp/bad1.json"
expect 1 "run 'a': measured: needs step_time_s, memory, or both" \
  $STAGGER calibrate --runs "$tmp/bad1.json" --fit none
jq '.runs[1].id = "a"' "$tmp/runs.json" >"$tmp/bad2.json"
expect 1 "id 'a' appears twice" $STAGGER calibrate --runs "$tmp/bad2.json" --fit none
jq '.runs[0].options["zero-stage"] = 5' "$tmp/runs.json" >"$tmp/bad3.json"
expect 1 "zero-stage 5" $STAGGER calibrate --runs "$tmp/bad3.json" --fit none
jq '.runs[0].set = "test"' "$tmp/runs.json" >"$tmp/bad4.json"
expect 1 "'test' is none of calibration, held-out, excluded" $STAGGER calibrate --runs "$tmp/bad4.json" --fit none
jq '.runs |= map(select(.id == "a" or .id == "f"))' "$tmp/runs.json" >"$tmp/few.json"
expect 1 "too few to fit 2 parameters" $STAGGER calibrate --runs "$tmp/few.json" --fit gemm,network
echo '{"format": "stagger-calibration", "version": 1, "parameters": {"gemm": 9}}' >"$tmp/bad.json"
expect 1 "gemm" $STAGGER sim --model "$M/mlp.json" --cluster "$C/dgx-h100.json" --calibration "$tmp/bad.json"
echo "ok"
