#!/usr/bin/env bash
# The megatron strategy through the binary, as docs/LLM.md runs it: help,
# bad values (one message naming the option), and GPT-3 13B on two DGX
# H100 nodes with tensor, sequence and interleaved pipeline parallelism.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
M=$SRC/models/gpt3-13b.json
C=$SRC/models/clusters/dgx-h100.json
source "$SRC/tests/cli/lib/common.sh"

# num FILE KEY: the number under "KEY" in a report.json.
num() { sed -n "s/.*\"$2\":[[:space:]]*\([-0-9.e+]*\),*$/\1/p" "$1" | head -1; }

$STAGGER sim --help >"$tmp/help"
for o in --tensor-parallel --sequence-parallel --virtual-stages --pipeline-stages; do
  grep -q -- "$o" "$tmp/help" || fail "sim --help lacks $o"
done
$STAGGER sim --list-strategies >"$tmp/list"
grep -q "^megatron" "$tmp/list" || fail "--list-strategies lacks megatron"
grep -q "Narayanan" "$tmp/list" || fail "megatron's citation is not listed"

expect 2 "tensor-parallel" $STAGGER sim --model $M --cluster $C --strategy megatron \
  --tensor-parallel two
expect 1 "groups of 3" $STAGGER sim --model $M --cluster $C --strategy megatron \
  --tensor-parallel 3
expect 1 "key 'heads'" $STAGGER sim --model $M --cluster $C --nodes 2 --strategy megatron \
  --tensor-parallel 16
expect 1 "interleaving needs --pipeline-stages" $STAGGER sim --model $M --cluster $C \
  --strategy megatron --virtual-stages 2

# TP 8 inside each node, 2 stages of 2 chunks across the nodes, SP.
$STAGGER sim --model $M --cluster $C --nodes 2 --strategy megatron --tensor-parallel 8 \
  --pipeline-stages 2 --virtual-stages 2 --sequence-parallel --precision mixed \
  --micro-batch 1 --global-batch 8 --steps 2 --out "$tmp/mg" >"$tmp/table" 2>/dev/null
r=$tmp/mg/report.json
grep -q '"out_of_memory":[[:space:]]*null' "$r" || fail "GPT-3 13B does not fit"
[ "$(num "$r" tensor_parallel)" = 8 ] || fail "tensor_parallel note"
[ "$(num "$r" virtual_stages)" = 2 ] || fail "virtual_stages note"
[ "$(num "$r" vocab_padded)" = 51200 ] || fail "vocabulary not padded to 51200 (128 x 8)"
# Bubble (p - 1) / (v m) = 1 / 16.
awk -v b="$(num "$r" bubble_fraction_estimate)" 'BEGIN { exit !(b > 0.0624 && b < 0.0626) }' \
  || fail "bubble estimate"
grep -q "TP 8 + SP x PP 2 (2 chunks each, interleaved 1F1B) x DP 1" "$tmp/table" \
  || fail "no layout in the table"

# col FILE NAME: the largest value in column NAME of a CSV.
col() {
  awk -F, -v n="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == n) c = i; next }
    c && $c > m { m = $c } END { if (!c) exit 1; print m + 0 }' "$1"
}

# Issue 13's example: Llama-3 70B on 8 DGX H100 nodes, TP 8 + SP inside each
# node, 4 stages of 2 chunks, DP 2 with ZeRO 1, selective recomputation
# (at bf16 with fp32 master weights: --precision mixed).
L=$SRC/models/llama-3-70b.json
$STAGGER sim --model $L --cluster $C --nodes 8 --strategy megatron --tensor-parallel 8 \
  --pipeline-stages 4 --virtual-stages 2 --sequence-parallel --zero-stage 1 \
  --micro-batch 1 --global-batch 512 --precision mixed --steps 2 \
  --out "$tmp/l70" >"$tmp/table" 2>/dev/null
r=$tmp/l70/report.json
grep -q '"out_of_memory":[[:space:]]*null' "$r" || fail "Llama-3 70B does not fit"
grep -q "TP 8 + SP x PP 4 (2 chunks each, interleaved 1F1B) x DP 2, ZeRO 1 over DP" "$tmp/table" \
  || fail "no Llama-3 70B layout in the table"
# Memory by category per GPU: ZeRO 1 over 2 replicas keeps 12 / 2 bytes of
# Adam state per 2-byte parameter; Megatron-LM's fp32 main gradients (its
# default under bf16: --framework megatron) take 4 bytes, twice the params.
awk -F'[:,]' '
  function v(x) { gsub(/[^0-9]/, "", x); return x + 0 }
  /"peak_by_category":/ { on = 1; gpus++; next }
  on && /"params":/ { p = v($2) } on && /"grads":/ { g = v($2) }
  on && /"optimizer":/ { o = v($2) } on && /"activations":/ { a = v($2) }
  on && /}/ { on = 0; if (o != 3 * p || g != 2 * p || a <= 0) bad = 1 }
  END { exit !(gpus == 64 && !bad) }' "$r" || fail "GPU memory by category"
# Each communicator's traffic (groups.csv), and no link above its capacity.
for g in tp pipe data; do
  awk -v m="$(col "$tmp/l70/groups.csv" $g)" 'BEGIN { exit !(m > 0) }' || fail "no $g traffic"
done
awk -F, 'NR > 1 && $10 > $5 * (1 + 1e-9) { exit 1 }' "$tmp/l70/links.csv" \
  || fail "a link above its capacity"

# Mixtral 8x7B with its 8 experts over 8 data-parallel ranks (issue 13's
# example): experts/8 per rank, the "ep" communicator moving the
# dispatch and combine, and the report says the layout.
X=$SRC/models/mixtral-8x7b.json
expect 1 "expert-parallel 3 does not divide" $STAGGER sim --model $X --cluster $C --nodes 8 \
  --strategy megatron --tensor-parallel 8 --expert-parallel 3
expect 1 "has no MoE layer" $STAGGER sim --model $M --cluster $C --strategy megatron \
  --expert-parallel 2
$STAGGER sim --model $X --cluster $C --nodes 8 --strategy megatron --tensor-parallel 8 \
  --expert-parallel 8 --sequence-parallel --zero-stage 1 \
  --precision mixed --micro-batch 1 --global-batch 64 --steps 2 --out "$tmp/mx" \
  >"$tmp/table" 2>/dev/null
r=$tmp/mx/report.json
grep -q '"out_of_memory":[[:space:]]*null' "$r" || fail "Mixtral 8x7B does not fit"
[ "$(num "$r" expert_parallel)" = 8 ] || fail "expert_parallel note"
grep -q "TP 8 + SP x PP 1 x DP 8 (EP 8), ZeRO 1 over DP" "$tmp/table" || fail "no EP in the table"
for g in ep data tp; do
  awk -v m="$(col "$tmp/mx/groups.csv" "$g")" 'BEGIN { exit !(m > 0) }' || fail "no $g traffic"
done
# EP 8 over DP 8: each expert's gradients live on one rank (groups of one).
[ "$(col "$tmp/mx/groups.csv" "expert data")" = 0 ] || fail "expert data traffic over groups of 1"

# Published throughput (Narayanan et al., SC 2021, table 1: GPT models on
# DGX A100 nodes, sequence 2048, vocabulary 51200, mixed precision, full
# recomputation): 18.4B with TP 8 on 256 GPUs, batch 1024, 135 TFLOP/s per
# GPU; 39.1B with TP 8 x PP 2 on 512 GPUs, batch 1536, 138 TFLOP/s; by the
# paper's count F = 96 B s l h^2 (1 + s/6h + V/16lh) FLOPs a step, run as
# traces/reference/published-runs/runs.json has them (micro-batch 8, 16-bit
# gradient reductions overlapped with backward: the 2021 code's defaults).
# With the shipped calibration (fitted on the 39.1B among others; the 18.4B
# is held out) each must land within 25 % of the measured rate, the issue's
# bound on any run; tests/cli/published.sh checks the whole table.
mfu() { # SIZE NODES STAGES BATCH LAYERS HIDDEN TFLOPS
  $STAGGER sim --model $SRC/tests/data/validation/megatron-gpt-$1.json \
    --cluster $SRC/models/clusters/dgx-a100.json --nodes $2 --strategy megatron \
    --tensor-parallel 8 --pipeline-stages $3 --recompute full --precision mixed \
    --global-batch $4 --micro-batch 8 --grad-reduce 16bit --overlap-grad-reduce on \
    --out "$tmp/n$1" >/dev/null 2>&1
  local step
  step=$(num "$tmp/n$1/report.json" step_time_s)
  awk -v t="$step" -v B=$4 -v l=$5 -v h=$6 -v n=$(($2 * 8)) -v m=$7 -v name=$1 'BEGIN {
    s = 2048; V = 51200
    F = 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
    r = F / (t * n) / 1e12 / m
    printf "GPT %s: %.1f TFLOP/s per GPU predicted, %d measured: %.2fx\n", name, F / (t * n) / 1e12, m, r
    exit !(r >= 0.8 && r <= 1.25) }' || fail "GPT $1 throughput outside the band"
}
mfu 18.4b 32 1 1024 40 6144 135
mfu 39.1b 64 2 1536 48 8192 138

# Llama 3 405B's 126 layers on 16 stages (Llama 3 paper, section 3.3.2:
# one layer fewer on the first and the last stage): refused evenly, with
# the options that place them named; run as the paper did and as
# Megatron-LM's accounting of the embedding and the loss does, the same.
B=$SRC/models/llama-3-405b.json
expect 1 "first-stage-layers" $STAGGER sim --model $B --cluster $C --nodes 16 \
  --strategy megatron --tensor-parallel 8 --pipeline-stages 16
expect 1 "exclude each other" $STAGGER sim --model $B --cluster $C --nodes 16 \
  --strategy megatron --tensor-parallel 8 --pipeline-stages 16 --first-stage-layers 7 \
  --last-stage-layers 7 --account-for-loss
for split in "--first-stage-layers 7 --last-stage-layers 7" \
             "--account-for-embedding --account-for-loss"; do
  # shellcheck disable=SC2086
  $STAGGER sim --model $B --cluster $C --nodes 16 --strategy megatron --tensor-parallel 8 \
    --sequence-parallel --pipeline-stages 16 $split --precision mixed --seq-len 8192 \
    --micro-batch 1 --global-batch 16 --recompute full --out "$tmp/l405" >/dev/null 2>&1 \
    || fail "405B on 16 stages: $split"
  grep -q '"stage_transformer_layers":[[:space:]]*"7,8,8,8,8,8,8,8,8,8,8,8,8,8,8,7"' \
    "$tmp/l405/report.json" || fail "405B stages: $split"
done

# The planner crosses --layer-split like any list: GPT-2's 12 layers on 5
# stages only split balanced.
$STAGGER plan --model $SRC/models/gpt2-124m.json --cluster $C --gpus 5 --strategy megatron \
  --pipeline-stages 5 --layer-split even,balanced --global-batch 10 --micro-batch 1 \
  --precision mixed >"$tmp/plan" 2>&1 || fail "plan with --layer-split even,balanced"
grep -q "^Winner: .*pipeline-stages=5 .*layer-split=balanced" "$tmp/plan" \
  || fail "no balanced 5-stage winner"
grep -q "do not divide the model's 12 transformer layers" "$tmp/plan" \
  || fail "the even split's refusal is not listed"

# The schedule round-trips through its JSON, derived model and parts included.
$STAGGER schedule --model $M --cluster $C --nodes 2 --strategy megatron --tensor-parallel 8 \
  --sequence-parallel --micro-batch 1 --global-batch 2 --out "$tmp/s.json" >/dev/null
grep -q '"tensor_parallel":' "$tmp/s.json" || fail "schedule's model lacks tensor_parallel"
grep -q '"part":[[:space:]]*2' "$tmp/s.json" || fail "no op in parts"
$STAGGER sim --schedule "$tmp/s.json" --out "$tmp/again" >/dev/null 2>&1 \
  || fail "the written schedule does not simulate"
echo "ok"
