#!/usr/bin/env bash
# `stagger plan` under mpirun (issue 13 part 6): the search spreads over the
# MPI ranks (each builds and simulates its share of every wave, and all
# exchange the results) and writes byte for byte the single-process plan.
# Skipped (77) where mpirun or the MPI module (libstagger-mpi.so, built when
# CMake finds MPI) is missing.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
command -v mpirun >/dev/null || { echo "SKIP: no mpirun (Debian: openmpi-bin)"; exit 77; }
[ -e "$(dirname "$STAGGER")/lib/stagger/libstagger-mpi.so" ] ||
  { echo "SKIP: stagger was built without MPI (libopenmpi-dev)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cat >"$tmp/m.json" <<'JSON'
{"name": "small-llama", "input": [512], "dtype": "bf16", "layers": [
 {"name": "embed", "type": "embedding", "vocab": 32000, "dim": 1024},
 {"repeat": 8, "layers": [{"name": "layers.{i}", "type": "llama_block", "heads": 16,
   "kv_heads": 4, "ffn": 2816}]},
 {"name": "norm", "type": "rmsnorm"},
 {"name": "lm_head", "type": "lm_head", "vocab": 32000},
 {"name": "loss", "type": "softmax_cross_entropy"}]}
JSON
# Waves of 4 make many exchanges; every strategy, so every kind of point crosses.
args=(--model "$tmp/m.json" --cluster "$SRC/models/clusters/dgx-h100.json" --nodes 1-4
      --global-batch 64 --precision mixed --micro-batch 1,2 --wave 4 --threads 1 -q)
$STAGGER plan "${args[@]}" --out "$tmp/one" >"$tmp/one.txt"
# CI runs as root; two ranks may share the cores. Under LeakSanitizer (the
# sanitize build) OpenMPI's own allocations, many in plugins it has unloaded
# by exit, count as leaks no suppression can name: leaks are checked in the
# single-process run above, not in MPI's.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
mpirun -n 2 --oversubscribe --allow-run-as-root $STAGGER plan "${args[@]}" --out "$tmp/two" \
  >"$tmp/two.txt" || fail "mpirun -n 2 stagger plan failed"
cmp "$tmp/one/plan.json" "$tmp/two/plan.json" || fail "plan.json differs under mpirun"
cmp "$tmp/one/plan.csv" "$tmp/two/plan.csv" || fail "plan.csv differs under mpirun"
cmp "$tmp/one.txt" "$tmp/two.txt" || fail "the printed plan differs under mpirun"
grep -q '"simulated":[[:space:]]*true' "$tmp/two/plan.json" || fail "nothing simulated"
