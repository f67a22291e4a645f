#!/usr/bin/env bash
# `stagger plan --max-time` and its progress without a terminal (issue 22
# part 3): a search that reaches the limit starts no new wave, lists what is
# left as "unsearched" (plan.json's status and counts, the printed counts),
# ranks what it searched, and says so; a log (stderr not a TTY) gets the
# work ahead before the search starts. Under mpirun, process 0's clock
# decides for all, so the processes stop together (no deadlock).
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$SRC/tests/cli/lib/common.sh"
args=(--model "$SRC/models/mlp.json" --cluster "$SRC/models/clusters/dgx-h100.json"
      --nodes 1-64 --strategy dp --threads 1 --wave 4)

# A limit of 1 ms: the first wave runs (one at least, for an answer),
# the rest are left.
$STAGGER plan "${args[@]}" --max-time 1ms --out "$tmp/cut" >"$tmp/cut.txt" 2>"$tmp/cut.err"
grep -q "configurations to decide" "$tmp/cut.err" || fail "no work estimate in a log: $(cat "$tmp/cut.err")"
grep -q "The search stopped at --max-time 0.001 s" "$tmp/cut.txt" || fail "the stop is not said"
jq -e '.counts.unsearched > 0 and .counts.simulated > 0' "$tmp/cut/plan.json" >/dev/null ||
  fail "expected some simulated and some unsearched: $(jq -c .counts "$tmp/cut/plan.json")"
# Every point has one status; the counts add up to the configurations.
jq -e '.counts as $c | ($c.ok + $c.out_of_memory + $c.infeasible + $c.pruned + $c.failed
        + $c.excluded + $c.unsearched) == $c.configurations' "$tmp/cut/plan.json" >/dev/null ||
  fail "counts do not add up: $(jq -c .counts "$tmp/cut/plan.json")"
jq -e '[.points[] | select(.status == "unsearched")] | length > 0 and
       all(.[]; (.reason | test("--max-time")) and .simulated == false)' \
  "$tmp/cut/plan.json" >/dev/null || fail "unsearched points lack their reason"
[ "$(jq '[.points[] | select(.status == "unsearched")] | length' "$tmp/cut/plan.json")" = \
  "$(jq .counts.unsearched "$tmp/cut/plan.json")" ] || fail "unsearched count differs from the points"

# No limit: nothing unsearched; -q prints no progress.
$STAGGER plan "${args[@]}" -q --out "$tmp/all" >/dev/null 2>"$tmp/all.err"
jq -e '.counts.unsearched == 0' "$tmp/all/plan.json" >/dev/null || fail "unsearched without a limit"
! grep -q "configurations to decide" "$tmp/all.err" || fail "progress under --quiet"

for bad in 0 -5 abc; do
  expect 2 "max-time $bad" $STAGGER plan "${args[@]}" --max-time "$bad" -q --out "$tmp/bad"
done

# Under mpirun, when there: both processes stop at the same wave and agree.
if command -v mpirun >/dev/null && [ -e "$(dirname "$STAGGER")/lib/stagger/libstagger-mpi.so" ]; then
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
  timeout 120 mpirun -n 2 --oversubscribe --allow-run-as-root $STAGGER plan "${args[@]}" \
    --max-time 1ms -q --out "$tmp/mpi" >/dev/null || fail "mpirun with --max-time failed"
  jq -e '.counts.unsearched > 0' "$tmp/mpi/plan.json" >/dev/null || fail "mpirun: nothing unsearched"
fi
echo "ok"
