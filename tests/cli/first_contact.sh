#!/usr/bin/env bash
# What a new user meets first (issue 27), through the binary: headline
# numbers with their convention and their error, option lists searched
# whole, recompute modes that mean something, zero sizes refused, the
# capacity on the memory plot, distinct layouts compared, and the host
# profile's origin on validate.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
C=$SRC/models/clusters/dgx-h100.json
fail() { echo "FAIL: $*" >&2; exit 1; }

# expect CODE PATTERN CMD...: exit code CODE and PATTERN on stderr.
expect() {
  local code=$1 pattern=$2; shift 2
  set +e; "$@" >"$tmp/out" 2>"$tmp/err"; local got=$?; set -e
  [ "$got" -eq "$code" ] || { cat "$tmp/err" >&2; fail "exit $got, wanted $code: $*"; }
  grep -q -- "$pattern" "$tmp/err" || { cat "$tmp/err" >&2; fail "stderr lacks '$pattern': $*"; }
}

# ---- zero sizes: refused by sim, schedule and plan alike, never the default 8 GPUs.
for opt in nodes gpus ranks; do
  expect 2 "--$opt 0: must be between 1" \
    $STAGGER sim --model $SRC/models/mlp.json --cluster $C --$opt 0 --steps 2
  expect 2 "--$opt 0: must be between 1" \
    $STAGGER schedule --model $SRC/models/mlp.json --cluster $C --$opt 0 --out "$tmp/s.json"
done
expect 2 "--nodes 0" $STAGGER plan --model $SRC/models/mlp.json --cluster $C --nodes 0 -q
expect 2 "--gpus 0" $STAGGER plan --model $SRC/models/mlp.json --cluster $C --gpus 0 -q
# ... and 1 is still a size.
$STAGGER sim --model $SRC/models/mlp.json --cluster $C --gpus 1 --steps 2 >"$tmp/out" 2>/dev/null
grep -q "on 1 GPU " "$tmp/out" || fail "--gpus 1 did not run on one GPU"

# ---- plan: a list option is searched whole for every strategy that reads it.
# GPT-3 1.3B under ZeRO-3 at micro-batch 16 fits 40 GiB only with full
# recomputation: with the list, zero must try all three and rank the one
# that fits, as --recompute full alone does.
plan_zero() { # RECOMPUTE-LIST OUT
  $STAGGER plan --model $SRC/models/gpt3-1.3b.json --cluster $C --strategy zero --zero-stage 3 \
    --recompute "$1" --nodes 1 --micro-batch 16 --precision mixed --mem-cap 40GiB \
    --out "$2" >"$2.txt" 2>/dev/null
}
plan_zero full "$tmp/pfull"
plan_zero none,selective,full "$tmp/plist"
grep -q "^ *1 *zero .*recompute=full" "$tmp/plist.txt" || { cat "$tmp/plist.txt" >&2; fail "plan with the list ranks no zero with recompute=full"; }
for r in none selective full; do
  jq -e --arg r "$r" '[.points[] | select(.settings.recompute == $r)] | length == 1' \
    "$tmp/plist/plan.json" >/dev/null || fail "plan.json lacks the one configuration with recompute=$r"
done
full=$(jq -r '.points[] | select(.settings.recompute == "full") | .step_time_s' "$tmp/plist/plan.json")
alone=$(jq -r '.points[0].step_time_s' "$tmp/pfull/plan.json")
[ "$full" = "$alone" ] || fail "recompute=full in the list ($full s) is not --recompute full alone ($alone s)"
# The same for the other options a strategy reads without varying them by
# default: --pipeline-stages for pipeline, --zero-stage for cdp.
$STAGGER plan --model $SRC/models/mlp.json --cluster $C --strategy pipeline --pipeline-stages 2,4 \
  --pipeline-schedule 1f1b --balance time --recompute none --nodes 1 --micro-batch 8 \
  --out "$tmp/ppipe" >/dev/null 2>&1
for p in 2 4; do
  jq -e --arg p "$p" '[.points[] | select(.settings["pipeline-stages"] == $p)] | length == 1' \
    "$tmp/ppipe/plan.json" >/dev/null || fail "pipeline searched no --pipeline-stages $p"
done
$STAGGER plan --model $SRC/models/mlp.json --cluster $C --strategy cdp --zero-stage 1,2 \
  --update-rule dp --stages 2 --cdp-reduce chain --recompute none \
  --nodes 1 --micro-batch 8 --out "$tmp/pcdp" >/dev/null 2>&1
for z in 1 2; do
  jq -e --arg z "$z" '[.points[] | select(.settings["zero-stage"] == $z)] | length == 2' \
    "$tmp/pcdp/plan.json" >/dev/null || fail "cdp searched no --zero-stage $z"
done

echo "first contact: all checks passed"
