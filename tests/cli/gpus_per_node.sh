#!/usr/bin/env bash
# gpus_per_node.sh: --gpus-per-node K through the binary: help, a bad count
# (one message naming the option and the file), the schedule's cluster, the
# planner's node shape, and SAMO's VGG-19 data parallelism on Summit
# (docs/SAMO.md): with every node alike the dense step does not grow with
# the GPU count (the first G GPUs of 6-GPU nodes leave a partial last node,
# whose busiest NIC slows the whole ring: 32 GPUs were slower than 16).
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
C=$SRC/models/clusters/summit.json
source "$SRC/tests/cli/lib/common.sh"

$STAGGER sim --help >"$tmp/help"
grep -q -- "--gpus-per-node=K" "$tmp/help" || fail "sim --help lacks --gpus-per-node"
$STAGGER plan --help-all >"$tmp/plan-help"
grep -q -- "--gpus-per-node" "$tmp/plan-help" || fail "plan --help-all lacks --gpus-per-node"
expect 1 "summit.json: --gpus-per-node 7: a node holds 6 GPUs" \
  $STAGGER sim --model $SRC/models/mlp.json --cluster $C --gpus-per-node 7
expect 2 "gpus-per-node" $STAGGER sim --model $SRC/models/mlp.json --cluster $C --gpus-per-node 0

# The schedule carries the cut node: 3 nodes of 4 GPUs, 2 NICs.
$STAGGER schedule --model $SRC/models/mlp.json --cluster $C --gpus-per-node 4 --nodes 3 \
  --out "$tmp/s.json" >/dev/null 2>&1
tr -d ' \n\t' <"$tmp/s.json" >"$tmp/s.flat"
grep -q '"nodes":3,"gpus_per_node":4' "$tmp/s.flat" || fail "schedule's cluster is not 3 x 4 GPUs"
grep -q '"nics":2' "$tmp/s.flat" || fail "schedule's cluster lost its 2 NICs"

# The planner searches nodes of K GPUs: --nodes 1,2 gives 4 and 8 GPUs.
$STAGGER plan --model $SRC/models/mlp.json --cluster $C --gpus-per-node 4 --nodes 1,2 \
  --strategy dp --micro-batch 4 --threads 1 --out "$tmp/plan" >/dev/null 2>&1
tr -d ' \n\t' <"$tmp/plan/plan.json" >"$tmp/p.flat"
grep -q '"gpus_per_node":4' "$tmp/p.flat" || fail "plan.json lacks gpus_per_node 4"
grep -q '"nodes":2,"gpus":8' "$tmp/p.flat" || fail "plan searched no 2 nodes x 4 GPUs"
grep -q '"gpus":12' "$tmp/p.flat" && fail "plan searched 2 nodes of 6 GPUs"

# step G [OPTIONS...]: VGG-19's dense step (ms) on G Summit GPUs, global batch 128.
step() {
  local g=$1; shift
  $STAGGER sim --model $SRC/models/vgg19.json --cluster $C "$@" --strategy dp \
    --precision mixed --optimizer sgd --framework ideal --micro-batch $((128 / g)) \
    --global-batch 128 --steps 2 --out "$tmp/vgg" >/dev/null 2>&1
  sed -n 's/^\t"step_time_s":[[:space:]]*\([-0-9.e+]*\),*$/\1/p' "$tmp/vgg/report.json"
}
prev=
for g in 16 32 64 128; do
  t=$(step $g --gpus-per-node 4 --nodes $((g / 4)))
  [ -n "$t" ] || fail "no step time at $g GPUs"
  [ -z "$prev" ] || awk -v a="$prev" -v b="$t" 'BEGIN { exit !(b <= a) }' ||
    fail "--gpus-per-node 4: step grows from $prev s to $t s at $g GPUs"
  prev=$t
done
echo "ok"
