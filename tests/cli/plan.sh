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
# The header is the first line (csv.DictReader, pandas.read_csv take it from
# there); what the search was is in plan.json.
head -1 "$tmp/a/plan.csv" | grep -q "^index,strategy,status,gpus" || fail "plan.csv does not start with its header"
grep -q "^#" "$tmp/a/plan.csv" && fail "plan.csv holds comment lines"

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
  # As SVG, read back: the front is a staircase (only horizontal and
  # vertical segments), each strategy has a marker of its own (shape and
  # size), so points several strategies reach stay visible, and both log
  # axes say so. This search has dp, burst, multiplex and pipeline on one
  # point.
  $STAGGER plot "$tmp/a" --format svg >/dev/null
  for fig in plan_gpus plan_memory; do
    awk -v fig=$fig '
      /<g id="gnuplot_plot_/ { group = 1; name = ""; marker = "" }
      group && /<text>/ && name == "" { name = $0; sub(/.*<text>/, "", name); sub(/<\/text>.*/, "", name) }
      group && /xlink:href=.#gpPt/ && marker == "" {
        m = $0; sub(/.*#gpPt/, "", m); sub(/\x27.*/, "", m)
        s = $0; sub(/.*scale\(/, "", s); sub(/\).*/, "", s)
        marker = m " " s
        if (name != "over the memory cap") {
          if (marker in seen) { print fig ": " name " and " seen[marker] " share a marker"; bad = 1 }
          seen[marker] = name; strategies++
        }
      }
      group && name ~ /^Pareto front/ && /<path/ {
        d = $0; sub(/.* d=\x27/, "", d); sub(/\x27.*/, "", d)
        n = split(d, tok, /[ ML]+/); k = 0
        for (i = 1; i <= n; i++) if (tok[i] ~ /,/) { k++; split(tok[i], xy, ","); px[k] = xy[1]; py[k] = xy[2] }
        # Points 1-2 are the key sample; the front starts at point 3.
        for (i = 4; i <= k; i++) {
          if (px[i] != px[i - 1] && py[i] != py[i - 1]) { print fig ": slanted front segment"; bad = 1 }
          if (py[i] != py[i - 1]) vertical = 1
        }
        front = 1
      }
      /log scale/ { logs++ }
      END {
        if (!front) { print fig ": no Pareto front drawn"; bad = 1 }
        if (front && !vertical) { print fig ": the front never steps"; bad = 1 }
        if (strategies < 4) { print fig ": only " strategies " strategies drawn"; bad = 1 }
        if (logs < 2) { print fig ": a log axis does not say so"; bad = 1 }
        exit bad
      }' "$tmp/a/$fig.svg" || fail "$fig.svg"
  done
fi

# Bad input.
expect 2 "model FILE is required" $STAGGER plan --cluster $C
expect 2 "nodes 4-1" $STAGGER plan --model $M --cluster $C --nodes 4-1
expect 2 "emit-schedule $tmp/nope/w.json: there is no folder" \
  $STAGGER plan --model $M --cluster $C --emit-schedule "$tmp/nope/w.json"
expect 2 "zero-stage 4" $STAGGER plan --model $M --cluster $C --zero-stage 2,4
expect 2 "objective fastest" $STAGGER plan --model $M --cluster $C --objective fastest
expect 2 "unknown strategy 'nosuch'" $STAGGER plan --model $M --cluster $C --strategy nosuch
echo '{"nodez": 2}' >"$tmp/bad.json"
expect 1 "bad.json: key 'nodez'" $STAGGER plan --model $M --cluster $C --space "$tmp/bad.json"
expect 1 "no configuration fits" $STAGGER plan --model $M --cluster $C --strategy dp \
  --gpus 1 --micro-batch 4 --mem-cap 1MiB --emit-schedule "$tmp/none.json"


# A --mem-cap above the GPU's memory cannot make a configuration fit that the
# GPU cannot hold: the cap is the GPU's (dgx-h100: 81090 MiB, what a process
# sees), and the user is told so.
$STAGGER plan --model $M --cluster $C --nodes 1 --strategy dp --mem-cap 80GiB --out "$tmp/cap" \
  >/dev/null 2>"$tmp/err"
grep -q "note: --mem-cap 80.00 GiB is more than the GPU.s memory (H100-SXM: 79.19 GiB)" "$tmp/err" || { cat "$tmp/err" >&2; fail "no note for a cap above the GPU"; }
grep -q '"mem_cap_bytes":[[:space:]]*85029027840' "$tmp/cap/plan.json" || fail "the cap is not the GPU's 81090 MiB"
$STAGGER plan --model $M --cluster $C --nodes 1 --strategy dp --mem-cap 40GiB --out "$tmp/cap40" \
  >/dev/null 2>"$tmp/err"
! grep -q "note: --mem-cap" "$tmp/err" || fail "note printed for a cap below the GPU"
grep -q '"mem_cap_bytes":[[:space:]]*42949672960' "$tmp/cap40/plan.json" || fail "a cap below the GPU is not kept"
# Configurations that build the same schedule are simulated once and listed
# once (issue 22 part 4): a twin has no row of its own; its schedule's row
# names it after "= ".
$STAGGER plan --model "$SRC/models/resnet18.json" --cluster $C --nodes 1 --strategy pipeline \
  --micro-batch 8 --top 50 -q --out "$tmp/twins" >"$tmp/twins.txt"
twins=$(jq '[.points[] | select(.status == "ok" and .same_schedule_as != null)] | length' \
  "$tmp/twins/plan.json")
[ "$twins" -gt 0 ] || fail "no twins to list once in this space"
for rank in $(jq -r '.points[] | select(.status == "ok" and .same_schedule_as != null) | .rank' \
                "$tmp/twins/plan.json"); do
  ! grep -Eq "^ +$rank +pipeline " "$tmp/twins.txt" || fail "twin at rank $rank has its own row"
done
grep -Eq "^ +[0-9]+ +pipeline .*  = pipeline " "$tmp/twins.txt" || fail "no row names its twins"
grep -q "distinct schedules that fit" "$tmp/twins.txt" || fail "the heading does not count schedules"
echo "cli plan: ok"
