#!/usr/bin/env bash
# plan.sh: `stagger plan` as a user runs it: help, the ranked table, plan.json
# and plan.csv, determinism across thread counts, the winner's schedule,
# the JSON space file, the plots, and bad input (one message naming the
# option or file; exit 2 for bad usage, 1 for a failure).
# Env: STAGGER (the binary), SRC (the source tree), GNUPLOT (may be empty).
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
M=$SRC/models/mlp.json
C=$SRC/models/clusters/dgx-h100.json
fail() { echo "FAIL: $*" >&2; exit 1; }

# expect CODE PATTERN CMD...: exit code CODE and PATTERN on stderr, printed once.
expect() {
  local code=$1 pattern=$2; shift 2
  set +e; "$@" >"$tmp/out" 2>"$tmp/err"; local got=$?; set -e
  [ "$got" -eq "$code" ] || { cat "$tmp/err" >&2; fail "exit $got, wanted $code: $*"; }
  grep -q -- "$pattern" "$tmp/err" || { cat "$tmp/err" >&2; fail "stderr lacks '$pattern': $*"; }
  [ "$(grep -c '^stagger' "$tmp/err")" -le 1 ] || fail "error printed more than once: $*"
}

# Help: the command is listed, its options documented.
grep -q "plan" <<<"$($STAGGER --help)" || fail "top-level help lists no plan"
$STAGGER plan --help-all >"$tmp/help"
for opt in --nodes --global-batch --gpu-batch --mem-cap --gpu-budget --objective --prune \
           --threads --emit-schedule --space --zero-stage --precision; do
  grep -q -- "$opt" "$tmp/help" || fail "plan --help-all lacks $opt"
done

# A search: the table on stdout, the files in --out.
$STAGGER plan --model $M --cluster $C --gpus 1,2,4,8 --micro-batch 4,16 --global-batch 64 \
  --threads 1 --out "$tmp/a" --emit-schedule "$tmp/best.json" >"$tmp/table" 2>"$tmp/log"
grep -q "^ *1  " "$tmp/table" || fail "no rank 1 row"
grep -q "configurations:" "$tmp/table" || fail "no counts"
grep -q "^Winner:" "$tmp/table" || fail "no winner explanation"
grep -q "searched .* configurations" "$tmp/log" || fail "no timing on stderr"
for f in plan.json plan.csv; do [ -s "$tmp/a/$f" ] || fail "missing $f"; done
for key in '"format"' '"search"' '"counts"' '"winner"' '"points"' '"status"' '"bound"' \
           '"pareto_gpus"' '"peak_by_category"'; do
  grep -q "$key" "$tmp/a/plan.json" || fail "plan.json lacks $key"
done
grep -q "^# strategies: " <<<"$(head -5 "$tmp/a/plan.csv")" || fail "plan.csv lacks its strategies line"
grep -q "^index,strategy,status,gpus" "$tmp/a/plan.csv" || fail "plan.csv header"

# The winner's schedule: valid, and simulates.
$STAGGER schedule --check "$tmp/best.json" >/dev/null || fail "emitted schedule does not check"
$STAGGER sim --schedule "$tmp/best.json" >/dev/null 2>&1 || fail "emitted schedule does not simulate"

# Deterministic: the same search on 3 threads writes the same files.
$STAGGER plan --model $M --cluster $C --gpus 1,2,4,8 --micro-batch 4,16 --global-batch 64 \
  --threads 3 --out "$tmp/b" >/dev/null 2>&1
cmp -s "$tmp/a/plan.json" "$tmp/b/plan.json" || fail "plan.json differs between 1 and 3 threads"
cmp -s "$tmp/a/plan.csv" "$tmp/b/plan.csv" || fail "plan.csv differs between 1 and 3 threads"

# --bench: serial and parallel in one process, identical plans.
$STAGGER plan --model $M --cluster $C --gpus 1,2,4 --micro-batch 4 --strategy dp,zero \
  --bench >"$tmp/bench" 2>/dev/null
grep -q "plans identical: yes" "$tmp/bench" || fail "bench: plans differ"
grep -q "configurations/s" "$tmp/bench" || fail "bench: no rate"

# A space file, overridden by the command line.
cat >"$tmp/space.json" <<'EOF'
{"strategy": ["dp", "zero"], "gpus": "1-8:x2", "micro-batch": [4, 16],
 "zero-stage": [2, 3], "global-batch": 64}
EOF
$STAGGER plan --model $M --cluster $C --space "$tmp/space.json" --zero-stage 3 -q \
  --out "$tmp/c" >/dev/null 2>&1
grep -q '"zero-stage":[[:space:]]*"3"' "$tmp/c/plan.json" || fail "space file: no zero-stage 3"
if grep -q '"zero-stage":[[:space:]]*"2"' "$tmp/c/plan.json"; then
  fail "the command line did not override the space file"
fi

# Infeasible configurations are listed with their reason.
$STAGGER plan --model $M --cluster $C --strategy dp --gpus 3,4 --micro-batch 4 \
  --global-batch 64 --gpu-budget 3 --out "$tmp/d" >"$tmp/table" 2>/dev/null
grep -q "gpu-budget of 3" "$tmp/d/plan.json" || fail "budget reason missing"
grep -q "not a multiple" "$tmp/d/plan.json" || fail "batch reason missing"
grep -q "Not simulated, by reason" "$tmp/table" || fail "reasons not in the table"

# Plots of a plan directory.
if [[ -n "${GNUPLOT:-}" ]]; then
  $STAGGER plot "$tmp/a" >"$tmp/plots"
  grep -q "plan_gpus.png" "$tmp/plots" || fail "no plan_gpus.png"
  grep -q "plan_memory.png" "$tmp/plots" || fail "no plan_memory.png"
  [ -s "$tmp/a/plan_gpus.png" ] || fail "plan_gpus.png empty"
fi

# Bad input.
expect 2 "model FILE is required" $STAGGER plan --cluster $C
expect 2 "nodes 4-1" $STAGGER plan --model $M --cluster $C --nodes 4-1
expect 2 "zero-stage 4" $STAGGER plan --model $M --cluster $C --zero-stage 2,4
expect 2 "objective fastest" $STAGGER plan --model $M --cluster $C --objective fastest
expect 2 "unknown strategy 'nosuch'" $STAGGER plan --model $M --cluster $C --strategy nosuch
echo '{"nodez": 2}' >"$tmp/bad.json"
expect 1 "bad.json: key 'nodez'" $STAGGER plan --model $M --cluster $C --space "$tmp/bad.json"
expect 1 "no configuration fits" $STAGGER plan --model $M --cluster $C --strategy dp \
  --gpus 1 --micro-batch 4 --mem-cap 1MiB --emit-schedule "$tmp/none.json"

echo "cli plan: ok"
