#!/usr/bin/env bash
# cdp.sh: cyclic data parallelism through the binary, as docs/CDP.md runs it:
# DP against CDP side by side, what the report says about the stagger, the
# warm-up and the rules, model parallelism's GPU count, the schedule round
# trip, the plots, and bad combinations (exit 1) and values (exit 2).
# Environment (tests/CMakeLists.txt): STAGGER = the binary, SRC = the source
# tree, GNUPLOT = gnuplot's path or empty.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
M=$SRC/models/resnet50.json
C=$SRC/models/clusters/dgx-h100.json
source "$SRC/tests/cli/lib/common.sh"

# A number from report.json: the first "KEY": value after the line matching AFTER.
number() { # FILE AFTER KEY
  awk -v after="$2" -v key="\"$3\":" 'index($0, after) { f = 1 } f && index($0, key) {
    sub(/.*:[[:space:]]*/, ""); sub(/,$/, ""); print; exit }' "$1"
}

grep -q -- "--update-rule=v1|v2|dp" <<<"$($STAGGER sim --help)" ||
  fail "sim --help lacks --update-rule"
grep -q "^cdp" <<<"$($STAGGER sim --list-strategies)" || fail "--list-strategies lacks cdp"

# The issue's command: DP and CDP v2 side by side.
$STAGGER sim --model "$M" --cluster "$C" --strategy dp,cdp --update-rule v2 --ranks 8 \
  --stages 4 --steps 4 --out "$tmp/cdp" >"$tmp/table" 2>/dev/null
R=$tmp/cdp/cdp/report.json
grep -q '"update_rule":[[:space:]]*"v2"' "$R" || fail "report lacks the rule"
grep -q '"stages":[[:space:]]*4' "$R" || fail "report lacks the stages"
grep -q '"warmup_steps":[[:space:]]*1' "$R" || fail "report does not say step 0 is warm-up"
grep -q '"warmup":.*first step' "$R" || fail "report lacks the warm-up note"
delay=$(number "$R" '"notes"' stagger_delay_s)
estimate=$(number "$R" '"notes"' step_estimate_s)
awk -v d="$delay" -v t="$estimate" 'BEGIN { exit !(d > 0 && (d * 8 - t) ^ 2 < 1e-12) }' ||
  fail "the stagger $delay is not the estimated step $estimate over 8 workers"
dp_act=$(number "$tmp/cdp/dp/report.json" total_peak_by_category activations)
cdp_act=$(number "$R" total_peak_by_category activations)
[ "$cdp_act" -lt "$dp_act" ] ||
  fail "CDP's activations over all GPUs ($cdp_act) not below DP's ($dp_act)"

# Per-run rules, and the chain spreading gradient traffic that the
# collective bunches: a lower peak-to-mean.
$STAGGER sim --model "$M" --cluster "$C" --strategy cdp,cdp --cdp-reduce chain,collective \
  --ranks 8 --steps 6 --out "$tmp/reduce" >/dev/null 2>&1
chain=$(number "$tmp/reduce/cdp-cdp-reducechain/report.json" '"comm"' peak_to_mean)
coll=$(number "$tmp/reduce/cdp-cdp-reducecollective/report.json" '"comm"' peak_to_mean)
awk -v a="$chain" -v b="$coll" 'BEGIN { exit !(a < b) }' ||
  fail "chain peak/mean $chain not below the collective's $coll"

# Model parallelism: the GPUs the schedule uses, against DP with the same.
$STAGGER sim --model "$M" --cluster "$C" --strategy cdp --model-parallel --nodes 2 --ranks 8 \
  --stages 4 --steps 3 --out "$tmp/mp" >/dev/null 2>&1
used=$(grep -m1 '"gpus_used"' "$tmp/mp/report.json" | tr -dc 0-9)
needed=$(number "$tmp/mp/report.json" '"notes"' gpus_needed)
dpmp=$(number "$tmp/mp/report.json" '"notes"' gpus_dp_model_parallel)
[ "$used" -eq "$needed" ] || fail "gpus_used $used is not the $needed the schedule needs"
[ "$needed" -lt "$dpmp" ] || fail "CDP needs $needed GPUs, not fewer than DP's $dpmp"

# The schedule round trip keeps the stagger, the versions and the warm-up.
$STAGGER schedule --model "$M" --cluster "$C" --strategy cdp --update-rule v2 --ranks 4 \
  --steps 3 --out "$tmp/cdp.json" 2>/dev/null
grep -q '"start_ns"' "$tmp/cdp.json" || fail "schedule lacks the staggered starts"
grep -q '"version":[[:space:]]*1' "$tmp/cdp.json" || fail "schedule lacks parameter versions"
$STAGGER sim --model "$M" --cluster "$C" --strategy cdp --update-rule v2 --ranks 4 --steps 3 \
  --out "$tmp/built" >/dev/null 2>&1
$STAGGER sim --schedule "$tmp/cdp.json" --out "$tmp/loaded" >/dev/null 2>&1
a=$(grep -m1 '"step_time_s"' "$tmp/built/report.json")
b=$(grep -m1 '"step_time_s"' "$tmp/loaded/report.json")
[ "$a" = "$b" ] || fail "stored schedule gives $b, built one $a"

# Bad combinations name the options; bad values are usage errors.
expect 1 "--zero-stage 2 with --cdp-reduce collective" $STAGGER sim --model "$M" --cluster "$C" \
  --strategy cdp --zero-stage 2 --cdp-reduce collective
expect 1 "--zero-stage 1 with --model-parallel" $STAGGER sim --model "$M" --cluster "$C" \
  --strategy cdp --zero-stage 1 --model-parallel
expect 1 "need 32 GPUs" $STAGGER sim --model "$M" --cluster "$C" --strategy cdp \
  --model-parallel --update-rule dp --ranks 8 --stages 4
expect 2 "update-rule v3" $STAGGER sim --model "$M" --cluster "$C" --strategy cdp --update-rule v3
expect 2 "stage-split" $STAGGER sim --model "$M" --cluster "$C" --strategy cdp --stage-split time

# The comparison plot: memory of one GPU and activations over all GPUs.
if [ -n "${GNUPLOT:-}" ]; then
  $STAGGER plot "$tmp/cdp" >"$tmp/written"
  grep -q "compare_memory.png" "$tmp/written" || fail "no compare_memory.png"
  [ -s "$tmp/cdp/compare_memory.png" ] || fail "compare_memory.png is empty"
  grep -q "activations summed over all GPUs" <<<"$($STAGGER plot "$tmp/cdp" --format dumb)" ||
    fail "the text plot lacks the activations over all GPUs"
fi
echo "ok"
