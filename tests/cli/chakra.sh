#!/usr/bin/env bash
# Chakra execution traces through the binary, as a user runs them: a
# schedule exported (stagger schedule --format chakra) and simulated back
# (stagger sim --chakra) gives the same outputs; the files are where
# ASTRA-sim looks for them; bad traces and bad usage say what is wrong.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
M=$SRC/models/resnet18.json
C=$SRC/models/clusters/dgx-h100.json
source "$SRC/tests/cli/lib/common.sh"

grep -q -- "--chakra" <<<"$($STAGGER sim --help)" || fail "sim --help lacks --chakra"
grep -q "chakra" <<<"$($STAGGER schedule --help)" || fail "schedule --help lacks the chakra format"

# Export: one file per rank and the group file, for ZeRO-3 on 2 nodes x 4 GPUs.
$STAGGER schedule --model $M --cluster $C --nodes 2 --gpus 8 --strategy zero --zero-stage 3 \
  --steps 2 --format chakra --out "$tmp/et/r18" >"$tmp/desc"
grep -q "8 rank files" "$tmp/desc" || fail "export does not say what it wrote"
for r in 0 1 2 3 4 5 6 7; do [ -s "$tmp/et/r18.$r.et" ] || fail "no rank file $r"; done
grep -q '"1":' "$tmp/et/r18.comm_groups.json" || fail "group file has no process group 1"

# Import: the same outputs as simulating the strategy directly.
$STAGGER sim --model $M --cluster $C --nodes 2 --gpus 8 --strategy zero --zero-stage 3 \
  --steps 2 --out "$tmp/direct" >/dev/null 2>&1
$STAGGER sim --chakra "$tmp/et/r18" --cluster $C --nodes 2 --gpus 8 --out "$tmp/back" \
  >/dev/null 2>"$tmp/err"
grep -q "written by stagger" "$tmp/err" || fail "import does not say where the trace came from"
for f in report.json ops.csv memory.csv comm.csv trace.json; do
  cmp -s "$tmp/direct/$f" "$tmp/back/$f" || fail "$f differs after the round trip"
done
# --steps overrides the trace's.
$STAGGER sim --chakra "$tmp/et/r18" --cluster $C --nodes 2 --gpus 8 --steps 3 \
  --out "$tmp/three" >/dev/null 2>&1
grep -q '"steps":[[:space:]]*3' "$tmp/three/report.json" || fail "--steps is not applied"

# Plan on a trace: the trace's model at its global batch; the traced
# configuration is in the space, so the winner is never slower than it.
$STAGGER schedule --model $SRC/models/mlp.json --cluster $C --gpus 4 --strategy zero \
  --zero-stage 2 --micro-batch 8 --format chakra --out "$tmp/et/mlp" >/dev/null
$STAGGER plan --chakra "$tmp/et/mlp" --cluster $C --gpus 4 --strategy dp,zero \
  --micro-batch 2,4,8 --quiet >"$tmp/plan" 2>/dev/null
grep -q "the traced schedule (zero stage 2: 4 ranks, micro-batch 8" "$tmp/plan" ||
  fail "plan --chakra does not show the traced schedule"
ratio=$(grep -o "[0-9.]*x the trace's step time" "$tmp/plan" | grep -o "^[0-9.]*")
awk -v r="$ratio" 'BEGIN { exit !(r != "" && r <= 1.0) }' || fail "the winner is slower than the trace ($ratio)"
split=$(grep "plan's winner" "$tmp/plan" | grep -o "micro-batch [0-9]* x [0-9]*")
awk -v s="$split" 'BEGIN { split(s, w, " "); exit !(w[2] * w[4] == 8) }' ||
  fail "the plan did not keep the trace's global batch of 32 on 4 GPUs ($split)"
expect 2 "not both" $STAGGER plan --chakra "$tmp/et/mlp" --model $M --cluster $C

# A foreign trace, written byte by byte: empty metadata, then one node
# (id 1, COMP_NODE, duration_micros 5): simulated for 5 us; no plan for it.
printf '\x00\x06\x08\x01\x18\x04\x38\x05' >"$tmp/et/tiny.0.et"
$STAGGER sim --chakra "$tmp/et/tiny" --cluster $C --gpus 1 --out "$tmp/tiny" >"$tmp/table" 2>"$tmp/err"
grep -q "foreign" "$tmp/err" || fail "a foreign trace is not said to be one"
grep -q '"step_time_s":[[:space:]]*5e-06' "$tmp/tiny/report.json" || fail "the node does not take 5 us"
expect 1 "did not write has no model of layers" \
  $STAGGER plan --chakra "$tmp/et/tiny" --cluster $C --strategy dp --quiet

# Bad usage, bad traces.
expect 2 "unknown format 'onnx'" $STAGGER schedule --model $M --cluster $C --format onnx --out "$tmp/x"
expect 2 "drop --model" $STAGGER sim --chakra "$tmp/et/r18" --model $M --cluster $C
expect 2 "cluster FILE is required" $STAGGER sim --chakra "$tmp/et/r18"
expect 1 "nothere.0.et: no such file" $STAGGER sim --chakra "$tmp/et/nothere" --cluster $C
expect 1 "runs on GPU 4, but the cluster has 4 GPUs" \
  $STAGGER sim --chakra "$tmp/et/r18" --cluster $C --gpus 4
mv "$tmp/et/r18.5.et" "$tmp/r18.5.et"
expect 1 "r18.5.et: missing" $STAGGER sim --chakra "$tmp/et/r18" --cluster $C --nodes 2 --gpus 8
head -c $(( $(stat -c %s "$tmp/r18.5.et") - 10 )) "$tmp/r18.5.et" >"$tmp/et/r18.5.et"
expect 1 "r18.5.et: node #.*byte" $STAGGER sim --chakra "$tmp/et/r18" --cluster $C --nodes 2 --gpus 8
echo "cli chakra: ok"
