#!/usr/bin/env bash
# scripts/astra_compare.sh without ASTRA-sim: it fails clearly (exit 2) when
# no binary is given, and, with a stand-in for ASTRA-sim's binary that checks
# the files it is handed and logs fixed numbers in ASTRA-sim's words, it
# writes the like-for-like configuration (bandwidth in ASTRA-sim's GB/s of
# 2^30 B, one hop per switch, one chunk per collective, FIFO, the collective
# algorithm stagger is given), runs both and sets the numbers side by side.
# Cases the two cannot ask alike are refused (exit 2). (The real comparison
# needs an ASTRA-sim build: docs/INTEROP.md.) Skips without python3.
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

# The stand-in: ASTRA-sim's command line, its files checked, its log line per
# rank. It records the network and system files it was given.
mkdir -p "$tmp/bin"
cat >"$tmp/bin/AstraSim_Analytical_Congestion_Unaware" <<'STUB'
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
cp "$n" "$STUB_SEEN.network.yml"
cp "$s" "$STUB_SEEN.system.json"
ls "$w".*.et | while read -r f; do
  r=${f%.et}; r=${r##*.}
  echo "[workload] [info] sys[$r] finished, $((2000000 + r)) cycles, exposed communication 500000 cycles."
done
STUB
chmod +x "$tmp/bin/AstraSim_Analytical_Congestion_Unaware"
cp "$tmp/bin/AstraSim_Analytical_Congestion_Unaware" "$tmp/bin/AstraSim_Analytical_Congestion_Aware"
export STUB_SEEN=$tmp/seen

# Data parallelism over 2 nodes: all ranks in one group across nodes, so
# ASTRA-sim's two-dimensional ring and stagger's hierarchical algorithm.
"$SRC/scripts/astra_compare.sh" --astra "$tmp/bin/AstraSim_Analytical_Congestion_Unaware" \
  --stagger "$STAGGER" --work "$tmp/w" --model $M --cluster $C --nodes 2 --strategy zero \
  --zero-stage 2 --micro-batch 8 >"$tmp/table"
cat "$tmp/table"
n=$tmp/seen.network.yml
grep -q "npus_count: \[ 8, 2 \]" "$n" || fail "network is not 8 GPUs x 2 nodes"
# 450e9 / 2^30 and 50e9 / 2^30: ASTRA-sim's GB/s is 2^30 B/s
grep -q "bandwidth: \[ 419.095159, 46.566129 \]" "$n" || fail "bandwidth not in GB/s of 2^30 B"
grep -q "topology: \[ FullyConnected, FullyConnected \]" "$n" || fail "a switch is one hop"
grep -q "latency: \[ 2000.0, 5000.0 \]" "$n" || fail "latencies"
python3 - "$tmp/seen.system.json" <<'EOF' || fail "system configuration is not like for like"
import json, sys
s = json.load(open(sys.argv[1]))
want = {"preferred-dataset-splits": 1, "active-chunks-per-dimension": 1,
        "scheduling-policy": "FIFO", "endpoint-delay": 1, "roofline-enabled": 0,
        "collective-optimization": "localBWAware",
        "all-reduce-implementation": ["ring", "ring"]}
bad = {k: s.get(k) for k, v in want.items() if s.get(k) != v}
assert not bad, bad
assert s["local-mem-bw"] >= 1e9, s["local-mem-bw"]
EOF
grep -q "stagger's --comm-algo hierarchical" "$tmp/table" || fail "the algorithm is not said"
grep -q "2^30" "$tmp/table" || fail "the unit conversion is not said"
grep -q "preferred-dataset-splits 1" "$tmp/table" || fail "the chunking is not said"
grep -q "^step time (one step, ms) .* 2.000$" "$tmp/table" || fail "ASTRA-sim's step time"
grep -q "step - compute (ms) .* 0.500$" "$tmp/table" || fail "ASTRA-sim's exposed communication"
grep -q "ranks: 16 in ASTRA-sim, 16 in stagger" "$tmp/table" || fail "rank counts"
grep -q "^wall time (s) " "$tmp/table" || fail "no wall times"
grep -q "^peak memory (MiB) " "$tmp/table" || fail "no peak memory"
# stagger was told the same: hierarchical, no calibration, its NCCL efficiency out
grep -q "^0,0,.*COMM_COLL,.*,hierarchical$" "$tmp/w/stagger/ops.csv" ||
  fail "stagger did not run hierarchical"
python3 - "$tmp/w/cluster.json" <<'EOF' || fail "stagger's cluster keeps NCCL's efficiency"
import json, sys
perf = json.load(open(sys.argv[1]))["gpu"]["performance"]
assert "nccl_bus" not in perf and "nccl" not in perf, sorted(perf)
EOF
for d in stagger direct; do
  step=$(grep -o '"step_time_s":[[:space:]]*[0-9.e-]*' "$tmp/w/$d/report.json" | grep -o '[0-9.e-]*$')
  want=$(awk -v s="$step" 'BEGIN { printf "%.3f", s * 1e3 }')
  grep -q "^step time (one step, ms) .*$want " "$tmp/table" || fail "$d's step time is not $want ms"
done

# One node: one dimension; the congestion-aware binary takes it.
"$SRC/scripts/astra_compare.sh" --astra "$tmp/bin/AstraSim_Analytical_Congestion_Aware" \
  --stagger "$STAGGER" --work "$tmp/w1" --model $M --cluster $C --strategy dp \
  --micro-batch 8 >"$tmp/table1"
grep -q "npus_count: \[ 8 \]" "$n" || fail "one node is one dimension"
grep -q "collectives within one node (world): ring in both" "$tmp/table1" || fail "one node: ring"

# Refused: the congestion-aware backend over two dimensions, ranks sharing a GPU,
# a collective over one rank.
set +e
"$SRC/scripts/astra_compare.sh" --astra "$tmp/bin/AstraSim_Analytical_Congestion_Aware" \
  --stagger "$STAGGER" --work "$tmp/w2" --model $M --cluster $C --nodes 2 --strategy dp \
  >/dev/null 2>"$tmp/err2"
code2=$?
"$SRC/scripts/astra_compare.sh" --astra "$tmp/bin/AstraSim_Analytical_Congestion_Unaware" \
  --stagger "$STAGGER" --work "$tmp/w3" --model $M --cluster $C --gpus 2 --ranks 4 \
  --strategy dp >/dev/null 2>"$tmp/err3"
code3=$?
set -e
[ "$code2" -eq 2 ] && grep -q "one dimension" "$tmp/err2" || fail "congestion-aware, 2 dims: $code2"
[ "$code3" -eq 2 ] && grep -q "share" "$tmp/err3" || fail "shared GPUs: $code3"
# Megatron without data parallelism: gradient all-reduces over one rank each.
set +e
"$SRC/scripts/astra_compare.sh" --astra "$tmp/bin/AstraSim_Analytical_Congestion_Unaware" \
  --stagger "$STAGGER" --work "$tmp/w4" --model "$SRC/models/gpt2-124m.json" --cluster $C \
  --gpus 4 --strategy megatron --tensor-parallel 2 --pipeline-stages 2 --micro-batch 2 \
  --global-batch 8 >/dev/null 2>"$tmp/err4"
code4=$?
set -e
[ "$code4" -eq 2 ] && grep -q "group of one rank" "$tmp/err4" || fail "one-rank collectives: $code4"
echo "cli astra_compare: ok"
