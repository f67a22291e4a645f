#!/usr/bin/env bash
# stagger sim and stagger schedule through the binary, as a user runs them:
# help, outputs, determinism, the schedule round trip, and bad input (one
# clear message naming the file and the key; exit 1, or 2 for bad usage).
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
M=$SRC/models/mlp.json
C=$SRC/models/clusters/dgx-h100.json
fail() { echo "FAIL: $*" >&2; exit 1; }

# expect CODE PATTERN CMD...: exit code CODE and PATTERN on stderr.
expect() {
  local code=$1 pattern=$2; shift 2
  set +e; "$@" >"$tmp/out" 2>"$tmp/err"; local got=$?; set -e
  [ "$got" -eq "$code" ] || { cat "$tmp/err" >&2; fail "exit $got, wanted $code: $*"; }
  grep -q -- "$pattern" "$tmp/err" || { cat "$tmp/err" >&2; fail "stderr lacks '$pattern': $*"; }
  [ "$(grep -c '^stagger' "$tmp/err")" -le 1 ] || fail "error printed more than once: $*"
}

# Help and usage.
grep -q "sim" <<<"$($STAGGER --help)" || fail "top-level help lists no sim"
grep -q -- "--zero-stage" <<<"$($STAGGER sim --help)" || fail "sim --help lacks --zero-stage"
grep -q -- "--check" <<<"$($STAGGER schedule --help)" || fail "schedule --help lacks --check"
grep -q "^zero" <<<"$($STAGGER sim --list-strategies)" || fail "--list-strategies lacks zero"
expect 2 "unknown command" $STAGGER frobnicate
expect 2 "unknown strategy 'cyclic'" $STAGGER sim --model $M --cluster $C --strategy cyclic
expect 2 "model FILE is required" $STAGGER sim --cluster $C
expect 2 "bucket" $STAGGER sim --model $M --cluster $C --bucket-bytes 25XB
expect 2 "Unknown option" $STAGGER sim --model $M --cluster $C --bogus
expect 2 "precision" $STAGGER sim --model $M --cluster $C --precision fp4

# A model written in 16 bits trains in fp32 unless --precision says otherwise,
# and the user is told so; with --precision given, nothing is said.
sed 's/"name": *"mlp"/"name": "mlp", "dtype": "bf16"/' "$M" >"$tmp/mlp-bf16.json"
grep -q '"dtype": "bf16"' "$tmp/mlp-bf16.json" || fail "could not write the bf16 model"
$STAGGER sim --model "$tmp/mlp-bf16.json" --cluster $C --steps 2 --out "$tmp/bf16" >/dev/null 2>"$tmp/err"
grep -q "written in bf16, and without --precision it trains in fp32" "$tmp/err" || fail "no note for a bf16 model in fp32"
grep -q '"precision":[[:space:]]*"fp32"' "$tmp/bf16/report.json" || fail "the default precision is not fp32"
$STAGGER sim --model "$tmp/mlp-bf16.json" --cluster $C --steps 2 --precision fp32 --out "$tmp/bf16f" >/dev/null 2>"$tmp/err"
! grep -q "without --precision" "$tmp/err" || fail "note printed though --precision was given"
$STAGGER sim --model $M --cluster $C --steps 2 --out "$tmp/fp32" >/dev/null 2>"$tmp/err"
! grep -q "without --precision" "$tmp/err" || fail "note printed for an fp32 model"
# The planner takes --precision as its own list: the same note, and only without it.
$STAGGER plan --model "$tmp/mlp-bf16.json" --cluster $C --nodes 1 --strategy dp -q >/dev/null 2>"$tmp/err"
grep -q "without --precision it trains in fp32" "$tmp/err" || fail "plan: no note for a bf16 model in fp32"
$STAGGER plan --model "$tmp/mlp-bf16.json" --cluster $C --nodes 1 --strategy dp --precision mixed -q \
  >/dev/null 2>"$tmp/err"
! grep -q "without --precision" "$tmp/err" || fail "plan: note printed though --precision was given"

expect 2 "one value per strategy" $STAGGER sim --model $M --cluster $C --strategy zero,zero --zero-stage 1,2,3

# Per-strategy values: a comma list on a numeric option gives each run its own.
$STAGGER sim --model $M --cluster $C --gpus 4 --strategy zero,zero --zero-stage 1,3 \
  --out "$tmp/per" >"$tmp/table" 2>/dev/null
grep -q "zero-zero-stage1 *zero-zero-stage3" "$tmp/table" || fail "per-run names missing"
grep -q '"zero_stage":[[:space:]]*3' "$tmp/per/zero-zero-stage3/report.json" || fail "run 2 is not stage 3"

# Bad files: the message names the file and the key.
expect 1 "malformed.json:2:.*ends before" $STAGGER sim --model $SRC/tests/data/cli/malformed.json --cluster $C
expect 1 "negative.json.*out_features" $STAGGER sim --model $SRC/tests/data/cli/negative.json --cluster $C
expect 1 "unknown-type.json.*quantum_fourier" $STAGGER sim --model $SRC/tests/data/cli/unknown-type.json --cluster $C
expect 1 "bad-unit.json.*memory" $STAGGER sim --model $M --cluster $SRC/tests/data/cli/bad-unit.json
expect 1 "zero-gpus.json.*gpus_per_node" $STAGGER sim --model $M --cluster $SRC/tests/data/cli/zero-gpus.json
expect 1 "nothere.json" $STAGGER sim --model $SRC/nothere.json --cluster $C
expect 1 "global-batch 100" $STAGGER sim --model $M --cluster $C --gpus 4 --micro-batch 8 --global-batch 100

# Outputs: one folder per strategy, the contract's keys in the report.
$STAGGER sim --model $M --cluster $C --gpus 4 --strategy dp,zero --zero-stage 3 --steps 2 \
  --out "$tmp/a" >"$tmp/table" 2>/dev/null
grep -q "step time" "$tmp/table" || fail "no comparison table"
for s in dp zero; do
  for f in report.json trace.json memory.csv comm.csv ops.csv; do
    [ -s "$tmp/a/$s/$f" ] || fail "missing $s/$f"
  done
  for key in step_time_s samples_per_s gpus_used devices peak_bytes peak_by_category \
             busy_fraction total_peak_by_category bytes_total peak_to_mean out_of_memory; do
    grep -q "\"$key\"" "$tmp/a/$s/report.json" || fail "$s/report.json lacks $key"
  done
done
grep -q '"traceEvents"' "$tmp/a/dp/trace.json" || fail "trace.json has no traceEvents"
# Every table starts with its header (csv.DictReader and pandas take the
# column names from the first line); no comment lines anywhere.
for f in "$tmp"/a/dp/*.csv; do
  head -1 "$f" | grep -qE '^[a-z_]+,[a-z_ 0-9]+' || fail "$f does not start with its header"
  grep -q '^#' "$f" && fail "$f holds comment lines"
done
head -1 "$tmp/a/dp/memory.csv" | grep -qx "time_us,device,params,grads,optimizer,activations,comm,workspace,total" ||
  fail "memory.csv header"

# The same input twice gives byte-identical outputs.
$STAGGER sim --model $M --cluster $C --gpus 4 --strategy dp,zero --zero-stage 3 --steps 2 \
  --out "$tmp/b" >/dev/null 2>&1
for s in dp zero; do
  for f in report.json trace.json memory.csv comm.csv ops.csv; do
    cmp -s "$tmp/a/$s/$f" "$tmp/b/$s/$f" || fail "$s/$f differs between identical runs"
  done
done

# A stored schedule simulates to the same report as building it directly.
$STAGGER schedule --model $M --cluster $C --gpus 4 --strategy zero --zero-stage 3 --steps 2 \
  --out "$tmp/z3.json" >/dev/null
grep -q "zero stage 3" <<<"$($STAGGER schedule --check "$tmp/z3.json")" || fail "schedule --check"
$STAGGER sim --schedule "$tmp/z3.json" --out "$tmp/c" >/dev/null 2>&1
cmp -s "$tmp/a/zero/ops.csv" "$tmp/c/ops.csv" || fail "simulating the stored schedule differs"
grep "step_time_s" "$tmp/a/zero/report.json" >"$tmp/s1"
grep "step_time_s" "$tmp/c/report.json" >"$tmp/s2"
cmp -s "$tmp/s1" "$tmp/s2" || fail "step time of the stored schedule differs"

# A schedule file with a dangling dependency is refused with its location.
sed -E "s/\"deps\":([[:space:]]*)\\[0\\]/\"deps\":\\1[999999]/" "$tmp/z3.json" >"$tmp/dangling.json"
cmp -s "$tmp/z3.json" "$tmp/dangling.json" && fail "test fixture: no dependency rewritten"
expect 1 "dangling.json.*deps" $STAGGER sim --schedule "$tmp/dangling.json"

# Out of memory is reported, not accepted silently: GPT-3 13B in DP on H100s.
$STAGGER sim --model $SRC/models/gpt3-13b.json --cluster $C --micro-batch 1 \
  --out "$tmp/oom" >"$tmp/table" 2>"$tmp/err"
grep -q "out of memory" "$tmp/err" || fail "no out-of-memory warning"
grep -q '"over_bytes"' "$tmp/oom/report.json" || fail "report lacks the out-of-memory record"
echo "cli sim: ok"
