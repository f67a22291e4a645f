#!/usr/bin/env bash
# plan_bench.sh: the planner's speed, an older stagger against this one, in
# one script on the same machine (docs/PERFORMANCE.md, "Planner").
#
#   scripts/plan_bench.sh BEFORE [AFTER]
#
# BEFORE and AFTER are stagger binaries (AFTER: build/stagger). An older one
# builds from any commit without touching the work tree:
#   mkdir /tmp/old && git archive COMMIT | tar -x -C /tmp/old &&
#   cmake -S /tmp/old -B /tmp/old/build && cmake --build /tmp/old/build --target stagger
#
# Each runs `stagger plan ... --bench` (the same search on one thread, then on
# one per processor, and a check that both plans are identical) over
#   R: ResNet-50 on 1-16 nodes of 8 H100s, every strategy and knob (issue 11's
#      302 configurations/s), and, AFTER only, the same with --allow-stale
#      (every configuration admitted, as the older planner did);
#   G: GPT-3 2.7B on 1-8 nodes, global batch 512, mixed, 80 GiB (issue 11's
#      example), and AFTER with --allow-stale.
# A search that runs past PLAN_BENCH_LIMIT seconds (600) is reported so and
# the rest go on (R with --allow-stale: cdp's v1 runs that never settle).
# Wall-clock rates move with the machine's load (the cores are shared):
# configurations per CPU-second (the work done, whatever else runs) is the
# figure to compare; --bench prints both.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BEFORE=${1:?usage: plan_bench.sh BEFORE [AFTER]}
AFTER=${2:-$SRC/build/stagger}
R="--model $SRC/models/resnet50.json --cluster $SRC/models/clusters/dgx-h100.json --nodes 1-16"
G="--model $SRC/models/gpt3-2.7b.json --cluster $SRC/models/clusters/dgx-h100.json --nodes 1-8
   --global-batch 512 --mem-cap 80GiB --precision mixed"

# bench LABEL BIN ARGS...: one line per search, serial and parallel.
bench() {
  local label=$1 bin=$2
  shift 2
  local out
  local rc=0
  out=$(timeout "${PLAN_BENCH_LIMIT:-600}" "$bin" plan "$@" --bench 2>&1) || rc=$?
  if [ "$rc" = 124 ]; then
    echo "$label: over ${PLAN_BENCH_LIMIT:-600} s (not measured)"
    return 0
  fi
  [ "$rc" = 0 ] || { echo "$label: failed"; echo "$out"; return 1; }
  awk -v label="$label" '
    /^serial:/   { n = $3; ws = $6 }
    /^parallel:/ { wp = $6; threads = $9 }
    /^cpu:/      { cs = $3; cp = $9 }
    /^speedup:/  { same = $NF }
    END {
      printf "%-28s %6d cfg | serial %7.2f s wall %7.2f s cpu %7.0f cfg/cpu-s | " \
             "%s threads %7.2f s wall %7.0f cfg/s %7.2f s cpu | identical %s\n",
             label, n, ws, cs, n / cs, threads, wp, n / wp, cp, same
    }' <<<"$out"
}

uptime
bench "R before" "$BEFORE" $R
bench "R after" "$AFTER" $R
bench "R after, --allow-stale" "$AFTER" $R --allow-stale
bench "G before" "$BEFORE" $G
bench "G after" "$AFTER" $G
bench "G after, --allow-stale" "$AFTER" $G --allow-stale
