#!/usr/bin/env bash
# stagger run through the binary on the host backend: outputs with the loss,
# a stored schedule, plots from measurements, and clear errors.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
M=$SRC/models/mlp.json
C=$SRC/models/clusters/dgx-h100.json
fail() { echo "FAIL: $*" >&2; exit 1; }

grep -q -- "--backend" <<<"$($STAGGER run --help)" || fail "run --help lacks --backend"

# Build and run: the contract's files, measured, with one loss per step.
$STAGGER run --model $M --strategy zero --zero-stage 2 --ranks 2 --micro-batch 8 --steps 3 \
  --backend host --out "$tmp/a" >"$tmp/table" 2>"$tmp/err"
grep -q "loss per step" "$tmp/err" || fail "no loss line"
for f in report.json trace.json memory.csv comm.csv ops.csv; do
  [ -s "$tmp/a/$f" ] || fail "missing $f"
done
grep -q '"kind":[[:space:]]*"measured"' "$tmp/a/report.json" || fail "report is not measured"
grep -q '"loss":' "$tmp/a/report.json" || fail "report has no loss"
head -1 "$tmp/a/memory.csv" | grep -q "^time_us,device," || fail "memory.csv does not start with its header"

# A stored schedule runs the same way.
$STAGGER schedule --model $M --cluster $C --gpus 2 --strategy dp --steps 2 --micro-batch 4 \
  --out "$tmp/dp.json" >/dev/null
$STAGGER run --schedule "$tmp/dp.json" --backend host --out "$tmp/b" >/dev/null 2>&1
[ -s "$tmp/b/report.json" ] || fail "run --schedule wrote no report"

# Plots from measurements, when gnuplot is here.
if [ -n "${GNUPLOT:-}" ]; then
  $STAGGER plot "$tmp/a" >/dev/null
  [ -s "$tmp/a/memory.png" ] || fail "no memory plot of the measured run"
fi

# Errors: an unknown backend is bad usage; a custom layer is refused by name.
set +e
$STAGGER run --model $M --backend warp --out "$tmp/c" 2>"$tmp/err"; rc=$?
set -e
[ $rc -eq 2 ] || fail "unknown backend: exit $rc, wanted 2"
grep -q "warp" "$tmp/err" || fail "unknown backend not named"
set +e
$STAGGER run --model $SRC/tests/data/exec/custom.json --backend host 2>"$tmp/err"; rc=$?
set -e
[ $rc -eq 1 ] || fail "custom layer: exit $rc, wanted 1"
grep -q "'custom'" "$tmp/err" || fail "custom layer not named"
echo "cli run: ok"
