#!/usr/bin/env bash
# --steps auto through the binary: sim says whether and when the schedule
# became steady and measures only its steady window, a stored schedule keeps
# "auto", the executor runs the window the simulator predicts, the planner
# ranks by the steady step, and a bad --steps names what it takes.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
M=$SRC/models/mlp.json
C=$SRC/models/clusters/dgx-h100.json
fail() { echo "FAIL: $*" >&2; exit 1; }
key() { grep -o "\"$1\":[[:space:]]*[^,}]*" "$2" | head -1 | sed 's/.*:[[:space:]]*//'; }

set +e; $STAGGER sim --model $M --cluster $C --steps soon >/dev/null 2>"$tmp/err"; code=$?; set -e
[ $code -eq 2 ] || fail "--steps soon: exit $code, wanted 2"
grep -q "not an integer nor auto" "$tmp/err" || fail "--steps soon: unclear message"
grep -q -- "--steps=N|auto" <<<"$($STAGGER sim --help)" || fail "sim --help lacks --steps auto"

# Data parallelism starts every step idle: steady after one step.
$STAGGER sim --model $M --cluster $C --gpus 4 --out "$tmp/dp" >"$tmp/table" 2>/dev/null
grep -q "steady: every step starts idle; 1 step run" "$tmp/table" || fail "dp: no steady line"
[ "$(key mode "$tmp/dp/report.json")" = '"auto"' ] || fail "dp: mode is not auto"
[ "$(key converged "$tmp/dp/report.json")" = true ] || fail "dp: not converged"
[ "$(key steps_run "$tmp/dp/report.json")" = 1 ] || fail "dp: ran more than one step"

# Cyclic DP staggers its workers: steady later, and the window is after it.
# (On the bound, ideal: under a framework whose NCCL kernels take SMs, this
# small model's workers drift by a fraction of a microsecond a step and never
# repeat within the cap, which the report says as NOT STEADY.)
$STAGGER sim --model $M --cluster $C --gpus 8 --strategy cdp --cdp-reduce collective --framework ideal --out "$tmp/cdp" >"$tmp/table" 2>/dev/null
grep -q "steady: its phases repeat" "$tmp/table" || fail "cdp: no steady line"
from=$(key steady_from_step "$tmp/cdp/report.json")
[ "$from" -ge 1 ] || fail "cdp: steady from step $from"
[ "$(key window_first_step "$tmp/cdp/report.json")" = "$from" ] || fail "cdp: window not at $from"
# Two fixed steps average a step that is not steady yet, and the table says so.
$STAGGER sim --model $M --cluster $C --gpus 8 --strategy cdp --cdp-reduce collective --framework ideal --steps 2 >"$tmp/table" 2>/dev/null
grep -q "NOT" "$tmp/table" || fail "cdp --steps 2: not flagged"

# A stored schedule keeps auto.
$STAGGER schedule --model $M --cluster $C --gpus 2 --strategy dp --micro-batch 4 \
  --out "$tmp/dp.json" >/dev/null
grep -q '"steps":[[:space:]]*0' "$tmp/dp.json" || fail "schedule: steps is not 0 (auto)"
$STAGGER sim --schedule "$tmp/dp.json" >"$tmp/table" 2>/dev/null
grep -q "steady" "$tmp/table" || fail "sim --schedule: no steady line"

# The executor measures the predicted window: at least one warm-up step, 3
# measured, one after.
$STAGGER run --schedule "$tmp/dp.json" --backend host --out "$tmp/run" >"$tmp/table" 2>"$tmp/err"
grep -q -- "--steps auto: 5 steps, steps 2-4 measured" "$tmp/err" || { cat "$tmp/err"; fail "run: window"; }
[ "$(key window_first_step "$tmp/run/report.json")" = 1 ] || fail "run: window does not start at 1"
[ "$(key window_steps "$tmp/run/report.json")" = 3 ] || fail "run: window is not 3 steps"
grep -q "predicted steady window" "$tmp/table" || fail "run: table does not say which steps"

# The planner says what its step time is.
$STAGGER plan --model $M --cluster $C --gpus 4,8 --strategy dp,cdp --micro-batch 8 \
  --out "$tmp/plan" >"$tmp/table" 2>/dev/null
grep -q "the steady step" "$tmp/table" || fail "plan: table does not say steady"
grep -q '"steps_simulated"' "$tmp/plan/plan.json" || fail "plan.json lacks steps_simulated"
head -1 "$tmp/plan/plan.csv" | grep -q ",steady,update,label" || fail "plan.csv lacks the steady column"
echo ok
