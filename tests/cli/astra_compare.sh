#!/usr/bin/env bash
# scripts/astra_compare.sh without ASTRA-sim: it fails clearly (exit 2) when
# no binary is given, and, with a stand-in for ASTRA-sim's binary that checks
# the files it is handed and logs fixed numbers in ASTRA-sim's words, it
# writes a configuration ASTRA-sim reads, runs both and sets the numbers
# side by side. (The real comparison needs the user's ASTRA-sim build:
# docs/INTEROP.md.) Skips without python3, which the script needs.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
command -v python3 >/dev/null || { echo "python3 not installed: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
M=$SRC/models/mlp.json
C=$SRC/models/clusters/dgx-h100.json
fail() { echo "FAIL: $*" >&2; exit 1; }

set +e
env -u ASTRA_SIM "$SRC/scripts/astra_compare.sh" --stagger "$STAGGER" --model $M --cluster $C \
  >"$tmp/out" 2>"$tmp/err"
code=$?
set -e
[ "$code" -eq 2 ] || fail "without ASTRA-sim: exit $code, wanted 2"
grep -q "no ASTRA-sim binary: give --astra BIN or set ASTRA_SIM" "$tmp/err" || fail "no clear message"

# The stand-in: ASTRA-sim's command line, its files checked, its log line per rank.
cat >"$tmp/astra" <<'STUB'
#!/usr/bin/env bash
set -euo pipefail
for a in "$@"; do
  case "$a" in
    --workload-configuration=*) w=${a#*=} ;;
    --comm-group-configuration=*) g=${a#*=} ;;
    --system-configuration=*) s=${a#*=} ;;
    --network-configuration=*) n=${a#*=} ;;
    --remote-memory-configuration=*) r=${a#*=} ;;
  esac
done
[ -s "$w.0.et" ] && [ -s "$g" ] && [ -s "$r" ] || { echo "missing input files" >&2; exit 1; }
python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$s"
grep -q "npus_count: \[ 8, 2 \]" "$n" || { echo "network is not 8 GPUs x 2 nodes" >&2; exit 1; }
grep -q "bandwidth: \[ 450.000, 50.000 \]" "$n" || { echo "wrong bandwidths" >&2; exit 1; }
ls "$w".*.et | while read -r f; do
  r=${f%.et}; r=${r##*.}
  echo "[workload] [info] sys[$r] finished, $((2000000 + r)) cycles, exposed communication 500000 cycles."
done
STUB
chmod +x "$tmp/astra"
"$SRC/scripts/astra_compare.sh" --astra "$tmp/astra" --stagger "$STAGGER" --work "$tmp/w" \
  --model $M --cluster $C --nodes 2 --strategy zero --zero-stage 2 --micro-batch 8 >"$tmp/table"
cat "$tmp/table"
grep -q "step time (one step, ms) .* 2.000$" "$tmp/table" || fail "ASTRA-sim's step time"
grep -q "step - compute (ms) .* 0.500$" "$tmp/table" || fail "ASTRA-sim's exposed communication"
grep -q "ranks: 16 in ASTRA-sim, 16 in stagger" "$tmp/table" || fail "rank counts"
step=$(grep -o '"step_time_s":[[:space:]]*[0-9.e-]*' "$tmp/w/stagger/report.json" | grep -o '[0-9.e-]*$')
want=$(awk -v s="$step" 'BEGIN { printf "%.3f", s * 1e3 }')
grep -q "step time (one step, ms) *$want " "$tmp/table" || fail "stagger's step time is not $want ms"
echo "cli astra_compare: ok"
