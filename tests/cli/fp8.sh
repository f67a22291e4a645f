#!/usr/bin/env bash
# --precision fp8 through the binary (docs/LLM.md, "FP8 training"): a
# one-node Llama-3 8B step under Megatron-LM + TE FP8 is faster than bf16 but
# by less than 2x (Amdahl: only the linears' GEMMs double their peak;
# attention, norms, the head and communication do not), its weights grow by
# TE's FP8 copies, GPUs without FP8 tensor cores are refused by name (sim
# and plan), and the executor refuses fp8 up front.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
M=$SRC/models/llama-3-8b.json
H100=$SRC/models/clusters/dgx-h100.json
A100=$SRC/models/clusters/dgx-a100.json
source "$SRC/tests/cli/lib/common.sh"

# field FILE EXPR: a value of a JSON file (python3's json).
field() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }

grep -q "fp8" <<<"$($STAGGER sim --help)" || fail "sim --help lacks fp8"

LAYOUT=(--strategy megatron --model "$M" --tensor-parallel 8 --sequence-parallel
        --zero-stage 1 --global-batch 8 --micro-batch 1 --framework megatron)
for p in mixed fp8; do
  $STAGGER sim "${LAYOUT[@]}" --cluster "$H100" --precision $p --out "$tmp/$p" >/dev/null 2>&1
done
mixed=$(field "$tmp/mixed/report.json" "r['step_time_s']")
fp8=$(field "$tmp/fp8/report.json" "r['step_time_s']")
python3 -c "import sys; s = $mixed / $fp8; print('speedup %.3f' % s); sys.exit(0 if 1.05 < s < 2.0 else 1)" ||
  fail "fp8 step $fp8 s against mixed $mixed s: wanted a speedup in (1.05, 2)"
grep -q '"precision":[[:space:]]*"fp8"' "$tmp/fp8/report.json" || fail "report.json lacks fp8"

# Weights: bf16 plus TE's FP8 copy and transpose of each block's linears
# (218,103,808 elements per Llama-3 8B block, an eighth per rank, 32 blocks,
# 2 bytes each, and 240 bytes of scaling state per block); grads and
# optimizer states as under mixed.
peak() { field "$1" "r['devices'][0]['peak_by_category']['$2']"; }
extra=$(( $(peak "$tmp/fp8/report.json" params) - $(peak "$tmp/mixed/report.json" params) ))
[ "$extra" -eq $(( 32 * (2 * 218103808 / 8 + 240) )) ] || fail "fp8 weight cache $extra bytes"
for c in grads optimizer; do
  [ "$(peak "$tmp/fp8/report.json" $c)" -eq "$(peak "$tmp/mixed/report.json" $c)" ] ||
    fail "$c differ between mixed and fp8"
done

# No FP8 tensor cores: refused, naming the GPU.
expect 1 "precision fp8: the A100-SXM4-80GB has no FP8" $STAGGER sim "${LAYOUT[@]}" \
  --cluster "$A100" --precision fp8
# The planner crosses fp8 like any precision, and says why each A100 point is out.
$STAGGER plan --model "$M" --cluster "$A100" --nodes 1 --global-batch 8 --strategy megatron \
  --precision mixed,fp8 --tensor-parallel 8 --pipeline-stages 1 --virtual-stages 1 \
  --zero-stage 1 --recompute none --micro-batch 1 --out "$tmp/plan-a100" >"$tmp/plan.txt" 2>&1
grep -q "A100-SXM4-80GB has no FP8 tensor cores" "$tmp/plan.txt" || fail "plan gives no fp8 reason"
$STAGGER plan --model "$M" --cluster "$H100" --nodes 1 --global-batch 8 --strategy megatron \
  --precision mixed,fp8 --tensor-parallel 8 --pipeline-stages 1 --virtual-stages 1 \
  --zero-stage 1 --recompute none --micro-batch 1 --out "$tmp/plan-h100" >"$tmp/plan.txt" 2>&1
grep -q "^ *[12] .*precision=fp8$" "$tmp/plan.txt" || fail "plan on H100 did not rank fp8"
grep -q "^ *[12] .*precision=mixed$" "$tmp/plan.txt" || fail "plan on H100 did not rank mixed"

# The executor: simulated only, refused before any step runs.
expect 1 "precision fp8 (FP8 GEMMs are simulated only" $STAGGER run --strategy dp \
  --model "$SRC/models/mlp.json" --cluster "$H100" --gpus 2 --precision fp8 --steps 2 \
  --backend host
expect 2 "precision fp8" $STAGGER profile --model "$SRC/models/mlp.json" --batches 1 \
  --precision fp8 --out "$tmp/p.json"
echo "ok"
