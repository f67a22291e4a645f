#!/usr/bin/env bash
# cdp_slack.sh: cdp --model-parallel through the binary with 8 workers over
# 4 equal stages on the unit cluster at 4 nodes of 4 GPUs (docs/CDP.md,
# "Transfers absorbed in the stagger"), where boundaries that cross nodes
# cost some workers 5 us: with transfers ~0.5 % of a 1 ms pass the default
# slack keeps the paper's max(N, S) = 8 GPUs and reports the step it costs;
# --cdp-slack 0 takes more GPUs instead and says why.
# Environment (tests/CMakeLists.txt): STAGGER = the binary, SRC = the source tree.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
C=$SRC/tests/data/engine/cluster.json
fail() { echo "FAIL: $*" >&2; exit 1; }
number() { # FILE KEY: the first "KEY": value
  awk -v key="\"$2\":" 'index($0, key) { sub(/.*:[[:space:]]*/, ""); sub(/,$/, ""); print; exit }' "$1"
}

# Four equal layers (forward = backward, as the paper's stages): 1 ms each
# at batch 100 on the unit GPU (100 TFLOP/s), 1 byte per sample out.
{
  printf '{"name": "equal4", "input": [1], "layers": ['
  for i in 0 1 2 3; do
    [ $i -gt 0 ] && printf ', '
    printf '{"name": "l%d", "type": "custom", "params": 1000, "fwd_flops": 1000000000, ' $i
    printf '"bwd_flops": 1000000000, "activation_bytes": 4, "output_bytes": 1}'
  done
  printf ']}\n'
} >"$tmp/equal4.json"

run() { # OUT SLACK
  "$STAGGER" sim --model "$tmp/equal4.json" --cluster "$C" --nodes 4 --micro-batch 100 --compute-model roofline \
    --strategy cdp --model-parallel --ranks 8 --stages 4 --steps 6 --cdp-slack "$2" \
    --out "$tmp/$1" >"$tmp/$1.txt" 2>&1 || { cat "$tmp/$1.txt" >&2; fail "sim --cdp-slack $2"; }
}

run slack 0.01
R=$tmp/slack/report.json
used=$(grep -m1 '"gpus_used"' "$R" | tr -dc 0-9)
[ "$used" -eq 8 ] || fail "default slack: $used GPUs, not max(N, S) = 8"
grep -q '"transfers":[[:space:]]*"absorbed up to' "$R" || fail "report lacks the absorbed transfers"
grep -q 'transfers absorbed in the stagger' "$R" || fail "description lacks the absorbed transfers"
stretch=$(number "$R" step_stretch)
free=$(number "$R" step_free_transfers_s)
step=$(grep -m1 '"step_time_s"' "$R" | sed 's/.*:[[:space:]]*//; s/,$//')
awk -v e="$stretch" 'BEGIN { exit !(e > 0 && e <= 0.01) }' || fail "stretch $stretch not in (0, 1 %]"
awk -v s="$step" -v f="$free" -v e="$stretch" 'BEGIN { exit !(s >= f && s <= f * (1 + e) * 1.001) }' ||
  fail "simulated step $step outside [free $free, free x (1 + $stretch)]"

run none 0
R=$tmp/none/report.json
used0=$(grep -m1 '"gpus_used"' "$R" | tr -dc 0-9)
[ "$used0" -gt 8 ] || fail "--cdp-slack 0: $used0 GPUs, not more than 8"
grep -q '"transfers":[[:space:]]*"transfers too slow for the slack' "$R" ||
  fail "--cdp-slack 0 does not say why it takes more GPUs"
echo "slack 0.01: $used GPUs, step $step s (free transfers $free s, +$stretch); slack 0: $used0 GPUs"
