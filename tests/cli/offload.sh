#!/usr/bin/env bash
# --offload optimizer through the binary (ZeRO-Offload, Ren et al., USENIX
# ATC 2021; docs/LLM.md "ZeRO-Offload"): GPT-3 6.7B under ZeRO-2 on one
# 40 GB A100 does not fit with Adam's 12 bytes per parameter on the GPU
# (2P + 2P + 12P = 107 GB) and fits with them in host memory (2P + 2P =
# 27 GB, recomputing activations; DeepSpeed's reduce_bucket_size 5e8 and
# overlap_comm, so that no whole-model gradient bucket is held); each step
# moves 4P bytes over PCIe and takes longer than on the GPU alone; the
# report says so; ZeRO-3, other strategies and the executor are refused.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
M=$SRC/models/gpt3-6.7b.json
A100=$SRC/models/clusters/dgx-a100-40gb.json
source "$SRC/tests/cli/lib/common.sh"

field() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }

grep -q -- "--offload" <<<"$($STAGGER sim --help)" || fail "sim --help lacks --offload"

RUN=(--strategy zero --zero-stage 2 --model "$M" --cluster "$A100" --gpus 1 --precision mixed
     --micro-batch 1 --recompute full --steps 3 --bucket-bytes 500MB --overlap-grad-reduce on)
$STAGGER sim "${RUN[@]}" --out "$tmp/gpu" >/dev/null 2>&1
$STAGGER sim "${RUN[@]}" --offload optimizer --out "$tmp/cpu" >/dev/null 2>&1
grep -q '"out_of_memory":[[:space:]]*{' "$tmp/gpu/report.json" || fail "fits without offload"
grep -q '"out_of_memory":[[:space:]]*null' "$tmp/cpu/report.json" || fail "no fit with offload"
peak() { field "$1" "r['devices'][0]['peak_by_category']['$2']"; }
[ "$(peak "$tmp/cpu/report.json" optimizer)" -eq 0 ] || fail "optimizer states on the GPU"

# PCIe: 2P down + 2P up per step on the one rank (P from the model's params).
P=$(field "$tmp/cpu/report.json" "int(r['notes']['pcie_bytes_per_step'])")
pcie=$(field "$tmp/cpu/report.json" "r['comm']['bytes_by_link']['pcie'] / r['steady']['window_steps']")
python3 -c "import sys; sys.exit(0 if abs($pcie / $P - 1) < 0.01 else 1)" ||
  fail "PCIe bytes per step $pcie, note says $P"
params=$(field "$tmp/cpu/report.json" "r['notes']['host_optimizer_bytes'] / 12")
python3 -c "import sys; sys.exit(0 if abs($P / (4 * $params) - 1) < 1e-9 else 1)" ||
  fail "PCIe bytes per step $P, not 4 x $params parameters"
python3 -c "import sys; sys.exit(0 if 6.5e9 < $params < 6.9e9 else 1)" ||
  fail "GPT-3 6.7B with $params parameters"

# Slower than the GPU's step by at least the PCIe time (4P over 32 GB/s).
gpu=$(field "$tmp/gpu/report.json" "r['step_time_s']")
cpu=$(field "$tmp/cpu/report.json" "r['step_time_s']")
python3 -c "import sys; sys.exit(0 if $cpu - $gpu >= $P / 32e9 else 1)" ||
  fail "step $cpu s with offload against $gpu s without: less than the PCIe time apart"

# Refusals, naming the option.
expect 1 "zero stages 1 and 2" $STAGGER sim --strategy zero --zero-stage 3 --model "$M" \
  --cluster "$A100" --gpus 2 --precision mixed --micro-batch 1 --offload optimizer
expect 1 "those that do: zero" $STAGGER sim --strategy dp --model "$SRC/models/mlp.json" \
  --cluster "$A100" --gpus 2 --offload optimizer
expect 1 "host CPU" $STAGGER run --strategy zero --zero-stage 2 --model "$SRC/models/mlp.json" \
  --cluster "$A100" --gpus 2 --precision mixed --steps 2 --offload optimizer --backend host
echo "ok"
