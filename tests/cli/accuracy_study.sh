#!/usr/bin/env bash
# The accuracy study (plots/accuracy_study.sh, docs/CDP.md "Accuracy in the
# small") at its full length, held-out figures at the end only: every
# configuration trained for real on the UCI digits must reach DP's held-out
# accuracy within TOL percentage points, and DP must be far above chance
# (10 %), so a broken data path or a broken update fails. Plus: --data's
# errors, reproducibility (same seed, same losses), and two exact
# identities (burst trains as dp up to float rounding; cdp with the dp rule
# ends N + 1 steps with dp's weights after N: its last update runs in the
# step after).
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
command -v jq >/dev/null || { echo "SKIP: no jq"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
D=$SRC/tests/data/digits/optdigits.tes.csv
M=$SRC/tests/data/exec/digits-mlp.json
fail() { echo "FAIL: $*" >&2; exit 1; }
TOL=1.5      # percentage points of held-out accuracy (359 rows: 1 row = 0.28)
FLOOR=90     # DP's accuracy must be above this (chance: 10)

# Errors: a missing file, a malformed row, a model of the wrong shape.
set +e
$STAGGER run --model $M --ranks 1 --steps 1 --backend host --data "$tmp/none.csv" 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -q "none.csv" "$tmp/err" || fail "missing file: exit $rc, $(cat "$tmp/err")"
printf '1,2,0\n3,x,1\n' >"$tmp/bad.csv"
$STAGGER run --model $M --ranks 1 --steps 1 --backend host --data "$tmp/bad.csv" 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -q "bad.csv:2: column 2" "$tmp/err" || fail "bad row: $(cat "$tmp/err")"
$STAGGER run --model $SRC/tests/data/exec/tiny-mlp.json --ranks 1 --steps 1 --backend host \
  --data $D 2>"$tmp/err"; rc=$?
[ $rc -eq 1 ] && grep -q "64 features a row, but model 'tiny-mlp' takes 16 inputs" "$tmp/err" ||
  fail "wrong width: $(cat "$tmp/err")"
$STAGGER run --model $M --ranks 1 --steps 1 --backend host --eval-every 5 2>"$tmp/err"; rc=$?
[ $rc -eq 2 ] || fail "--eval-every without --data: exit $rc"
set -e

# Reproducible: the same seed gives the same losses and held-out figures.
run_dp() {
  $STAGGER run --model $M --ranks 4 --micro-batch 16 --steps 60 --backend host --data $D \
    --lr 3e-3 --eval-every 20 --out "$1" >/dev/null 2>&1
}
run_dp "$tmp/r1"
run_dp "$tmp/r2"
cmp -s "$tmp/r1/loss.csv" "$tmp/r2/loss.csv" || fail "two runs with one seed differ"
[ "$(awk -F, 'NR > 1 && $4 != ""' "$tmp/r1/loss.csv" | wc -l)" -eq 3 ] || fail "loss.csv: not 3 held-out rows"
$STAGGER run --model $M --ranks 4 --micro-batch 16 --steps 60 --backend host --data $D \
  --lr 3e-3 --seed 7 --out "$tmp/r3" >/dev/null 2>&1
cmp -s "$tmp/r1/loss.csv" "$tmp/r3/loss.csv" && fail "another seed gives the same losses"

# The study, final figures only.
STEPS=${STEPS:-800} EVERY=0 bash "$SRC/plots/accuracy_study.sh" "$STAGGER" "$tmp/study" - \
  >"$tmp/table" || fail "the study failed"
cat "$tmp/table"
acc() { awk -F, -v n="$1" '$1 == n { printf "%.4f", 100 * $4 }' "$tmp/study/final.csv"; }
dp=$(acc dp)
awk -v a="$dp" -v f=$FLOOR 'BEGIN { exit !(a > f) }' || fail "dp: $dp % is not above $FLOOR %"
for n in cdp-v1 cdp-v2 cdp-dp samo-p0.5 burst multiplex; do
  a=$(acc $n)
  [ -n "$a" ] || fail "$n: no held-out accuracy"
  awk -v a="$a" -v d="$dp" -v t=$TOL 'BEGIN { exit !(a >= d - t) }' ||
    fail "$n: $a % is more than $TOL points below dp's $dp %"
  [ "$(jq '.heldout[-1].steps' "$tmp/study/$n/report.json")" -eq "${STEPS:-800}" ] ||
    fail "$n: not trained ${STEPS:-800} steps"
done
# samo-p0.8 is shown, not held to the tolerance: a random mask at 80 % on
# this small MLP costs accuracy (docs/SAMO.md); only that it learns.
awk -v a="$(acc samo-p0.8)" 'BEGIN { exit !(a > 50) }' || fail "samo-p0.8 does not learn"

# Exact identities.
# burst computes dp's step with other GPU sets: the same losses but for the
# order of float sums (measured: 3.6e-6 relative at most over 800 steps).
paste -d, <(jq '.loss[]' "$tmp/study/dp/report.json") <(jq '.loss[]' "$tmp/study/burst/report.json") |
  awk -F, '{ d = ($1 - $2) / $1; if (d < 0) d = -d; if (d > 1e-4) bad++ } END { exit bad > 0 }' ||
  fail "burst's losses differ from dp's by more than 1e-4 relative"
$STAGGER run --model $M --ranks 4 --micro-batch 16 --steps 31 --backend host --data $D --lr 3e-3 \
  --strategy cdp --update-rule dp --out "$tmp/c31" >/dev/null 2>&1
$STAGGER run --model $M --ranks 4 --micro-batch 16 --steps 30 --backend host --data $D --lr 3e-3 \
  --out "$tmp/d30" >/dev/null 2>&1
[ "$(jq .heldout[0].loss "$tmp/c31/report.json")" = "$(jq .heldout[0].loss "$tmp/d30/report.json")" ] ||
  fail "cdp (rule dp) after 31 steps differs from dp after 30"
echo "cli accuracy_study: ok"
