#!/usr/bin/env bash
# The shipped default calibration against the published runs it was and was
# not fitted on (docs/VALIDATION.md, "Against published training runs"):
# fitted on exactly the calibration set's runs; with it, the held-out runs
# within the limits below; sim reads it by default and gives every step and
# memory peak its interval, and --calibration none takes it away.
#
# Limits: the issue's targets, a held-out step MAPE of at most 10 % and no run
# off by more than 25 % (the shipped fit: 9.5 % and -23.2 %, ResNet-50 on 8
# A100s, whose input pipeline stagger does not model).
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v jq >/dev/null || { echo "SKIP: jq is not installed"; exit 77; }
RUNS=$SRC/traces/reference/published-runs/runs.json
CAL=$SRC/models/calibration/default.json
[ -f "$CAL" ] || fail "no shipped calibration $CAL (scripts/validation_page.sh makes it)"

# 1. Fitted on the calibration set, all of it, and nothing else.
[ "$(jq -r '.fitted_on.set' "$CAL")" = calibration ] || fail "fitted_on.set is not calibration"
jq -r '.fitted_on.ids[]' "$CAL" | sort >"$tmp/fitted"
jq -r '.runs[] | select((.set // "calibration") == "calibration") | .id' "$RUNS" | sort >"$tmp/cal"
diff -q "$tmp/fitted" "$tmp/cal" >/dev/null || fail "the fit's runs are not the calibration set"
[ "$(wc -l <"$tmp/cal")" -ge 30 ] || fail "fewer than 30 calibration runs"
[ "$(jq '[.runs[] | select(.set == "held-out")] | length' "$RUNS")" -ge 30 ] ||
  fail "fewer than 30 held-out runs"
# Every excluded run says why.
[ "$(jq '[.runs[] | select(.set == "excluded" and ((.note // "") | length) < 20)] | length' \
  "$RUNS")" = 0 ] || fail "an excluded run has no note"
# At least dense LLMs on A100 and H100, an MoE and CNNs among the runs.
for pat in dgx-a100 dgx-h100; do
  jq -e --arg p "$pat" '[.runs[] | select(.cluster | contains($p)) | select(.strategy == "megatron" or .strategy == "zero")] | length > 3' "$RUNS" >/dev/null ||
    fail "no dense LLM runs on $pat"
done
jq -e '[.runs[] | select(.options["expert-parallel"] != null)] | length >= 1' "$RUNS" >/dev/null ||
  fail "no MoE run"
jq -e '[.runs[] | select(.model | test("resne"))] | length >= 4' "$RUNS" >/dev/null ||
  fail "no CNN runs"

# 2. The held-out runs with the shipped calibration.
"$STAGGER" calibrate --runs "$RUNS" --fit none --threads 2 --check 10,25 \
  >"$tmp/table" 2>"$tmp/err" || { tail -5 "$tmp/table"; cat "$tmp/err"; fail "held-out limits"; }
grep -q "calibration: .*megatron x" "$tmp/table" || fail "the shipped calibration was not read"
grep -q "held out (never fitted)" "$tmp/table" || fail "no held-out summary"
sed -n 's/.*held out (never fitted): *\(.*\)/held out: \1/p' "$tmp/table"

# 3. sim reads it by default: an interval on the step and the memory peak.
M=$SRC/tests/data/validation/megatron-gpt-1.7b.json
C=$SRC/models/clusters/dgx-a100.json
"$STAGGER" sim --model "$M" --cluster "$C" --strategy megatron --nodes 4 --micro-batch 4 \
  --global-batch 512 --precision mixed --recompute full --out "$tmp/run" >"$tmp/sim" 2>"$tmp/err"
grep -q "calibration: .*default.json" "$tmp/err" || fail "sim did not say which calibration"
grep -Eq "step time +[0-9.]+ m?s \([0-9.]+ m?s \.\. [0-9.]+ m?s, 90 %\)" "$tmp/sim" ||
  { cat "$tmp/sim"; fail "no interval on the step time"; }
jq -e '.step_time_interval_s | length == 2' "$tmp/run/report.json" >/dev/null ||
  fail "report.json has no step interval"
lo=$(jq '.step_time_interval_s[0]' "$tmp/run/report.json")
hi=$(jq '.step_time_interval_s[1]' "$tmp/run/report.json")
mid=$(jq '.step_time_s' "$tmp/run/report.json")
awk -v l="$lo" -v m="$mid" -v h="$hi" 'BEGIN { exit !(l < m && m < h) }' ||
  fail "interval [$lo, $hi] does not hold $mid"
"$STAGGER" sim --model "$M" --cluster "$C" --strategy megatron --nodes 4 --micro-batch 4 \
  --global-batch 512 --precision mixed --recompute full --calibration none --out "$tmp/raw" \
  >"$tmp/sim" 2>/dev/null
jq -e '.step_time_interval_s == null' "$tmp/raw/report.json" >/dev/null ||
  fail "--calibration none still has an interval"
# The plots' titles carry the interval too.
if command -v gnuplot >/dev/null; then
  "$STAGGER" plot "$tmp/run" --format svg >/dev/null 2>&1 || fail "plot failed"
  grep -q "90 %)" "$tmp/run/memory.svg" || fail "the plots do not show the step's interval"
fi
# The calibrated step is the slower: the framework factor is below 1.
awk -v a="$mid" -v b="$(jq '.step_time_s' "$tmp/raw/report.json")" 'BEGIN { exit !(a > b) }' ||
  fail "the calibration did not slow the Megatron step"
echo "ok"
