#!/usr/bin/env bash
# What tables and figures call things: a run on the host backend has CPUs,
# not GPUs, no made-up capacity, and says what it was measured on; counts
# agree in number ("1 GPU", "1 node", "1 rank").
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
M=$SRC/models/mlp.json
C=$SRC/models/clusters/dgx-h100.json
fail() { echo "FAIL: $*" >&2; exit 1; }
has() { grep -q -- "$2" "$1" || { cat "$1" >&2; fail "$1 lacks '$2'"; }; }
lacks() { if grep -n -- "$2" "$1"; then fail "$1 has '$2'"; fi; }

# A run on the host: CPUs, measured on this machine, no capacity of a
# cluster it did not run on.
$STAGGER run --model $M --strategy dp,zero --ranks 2 --micro-batch 4 --steps 2 --backend host \
  --out "$tmp/host" >"$tmp/table" 2>"$tmp/log"
has "$tmp/table" "\[measured on host: [0-9]* CPU cores"
has "$tmp/table" "samples/s on 1 CPU ("
has "$tmp/table" "peak memory/CPU .* on CPU 0$"
has "$tmp/table" "CPUs used"
lacks "$tmp/table" "GPU"
lacks "$tmp/table" "capacity"
lacks "$tmp/table" "on local\]"
has "$tmp/log" "running 2 ranks for 2 steps"
grep -q '"device_kind":[[:space:]]*"CPU"' "$tmp/host/dp/report.json" || fail "report.json: device_kind"
grep -q '"name":"CPU 0 (node 0)"' "$tmp/host/dp/trace.json" || fail "trace.json names no CPU 0"
if [[ -n "${GNUPLOT:-}" ]]; then
  $STAGGER plot "$tmp/host" --format dumb >"$tmp/plots" 2>&1
  has "$tmp/plots" "CPU 0"
  lacks "$tmp/plots" "GPU"
fi

# One of each: singular.
$STAGGER run --model $M --steps 1 --backend host >/dev/null 2>"$tmp/log"
has "$tmp/log" "running 1 rank for 1 step\.\.\."
$STAGGER sim --model $M --cluster $C --gpus 1 >"$tmp/table" 2>/dev/null
has "$tmp/table" "dp: 1 rank, micro-batch"
has "$tmp/table" "samples/s on 1 GPU ("
has "$tmp/table" "\[predicted for 1 x H100-SXM\]"
has "$tmp/table" "(capacity 79.19 GiB)"
$STAGGER schedule --model $M --cluster $C --gpus 1 --steps 1 --out "$tmp/s.json" >"$tmp/desc"
has "$tmp/desc" "1 rank on 1 device (1 node), 1 program, 1 communicator, 1 step"
lacks "$tmp/desc" " 1 [a-z]*s[ ,)]"
# Several: plural.
$STAGGER sim --model $M --cluster $C --gpus 4 >"$tmp/table" 2>/dev/null
has "$tmp/table" "dp: 4 ranks"
has "$tmp/table" "samples/s on 4 GPUs ("
echo "labels: ok"
