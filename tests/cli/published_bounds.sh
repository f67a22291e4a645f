#!/usr/bin/env bash
# What a skeptic checks first of the published runs (docs/VALIDATION.md):
#
#   1. No run was measured faster than physics allows: with every kernel at
#      the GPU's peak FLOP/s or peak bandwidth (--compute-model roofline) and
#      no calibration, each run's simulated step is at most what it measured.
#      A run above its bound is described wrongly (or a cost is counted
#      twice): it failed for Qwen3-30B-A3B while the roofline charged each
#      expert the router's whole stream.
#   2. The inference behind the Megatron-Core H100 rows' gradient dtype (the
#      README does not give it): with fp32 reductions, Megatron-LM's default,
#      the 32B row's bound is above its measured step (so fp32 cannot be how
#      it ran), and with bf16 reductions below.
#
# Under the sanitizers (10-30x slower) part 1 takes one run of each source.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v jq >/dev/null || { echo "SKIP: jq is not installed"; exit 77; }
RUNS=$SRC/traces/reference/published-runs/runs.json
cd "$SRC"

pick='.'
if ldd "$STAGGER" 2>/dev/null | grep -q 'libasan'; then
  pick='.runs |= [group_by(.source)[] | .[0]]'
fi
jq "$pick | .runs[].options[\"compute-model\"] = \"roofline\"" "$RUNS" >"$tmp/runs.json"
n=$(jq '[.runs[] | select(.measured.step_time_s != null)] | length' "$tmp/runs.json")
"$STAGGER" calibrate --runs "$tmp/runs.json" --fit none --calibration none --threads 2 \
  >"$tmp/table" 2>"$tmp/err" || { cat "$tmp/err"; fail "calibrate failed"; }
# RUN SET MEASURED PREDICTED ERROR: every error at most 0.
awk '$1 !~ /,$/ && $2 ~ /^(calibration|held-out|excluded)$/ && $3 != "-" { seen++; e = $5; sub(/%$/, "", e)
       if (e + 0 > 0) { print "above its bound: " $0; bad++ } }
     END { if (seen != n) { print "read " seen " of " n " runs"; exit 1 } exit bad > 0 }' \
  n="$n" "$tmp/table" || fail "a published run measured faster than its roofline bound"
echo "ok: $n published step times at or above their roofline bound"

# 2. Megatron-Core 32B on 384 H100s, its options from runs.json.
args=$(jq -r '.runs[] | select(.id == "mcore-gpt-32b-h100") |
  "--model \(.model) --cluster \(.cluster) --strategy \(.strategy) " +
  ([.options | to_entries[] | select(.key != "grad-reduce") |
    if .value == true then "--\(.key)" else "--\(.key) \(.value)" end] | join(" ")) +
  " " + (.measured.step_time_s | tostring)' "$RUNS")
[ -n "$args" ] || fail "no mcore-gpt-32b-h100 in $RUNS"
measured=${args##* }
args=${args% *}
bound() { # $1: the gradients' dtype
  # shellcheck disable=SC2086
  "$STAGGER" sim $args --grad-reduce "$1" --compute-model roofline --calibration none \
    --out "$tmp/$1" >/dev/null 2>&1 || fail "sim --grad-reduce $1 failed"
  jq '.step_time_s' "$tmp/$1/report.json"
}
fp32=$(bound fp32)
bf16=$(bound 16bit)
awk -v b="$fp32" -v m="$measured" 'BEGIN { exit !(b > m) }' ||
  fail "fp32 reductions' bound $fp32 s is not above the measured $measured s"
awk -v b="$bf16" -v m="$measured" 'BEGIN { exit !(b < m) }' ||
  fail "bf16 reductions' bound $bf16 s is not below the measured $measured s"
echo "ok: mcore-gpt-32b bound $fp32 s with fp32 reductions, $bf16 s with bf16; measured $measured s"
