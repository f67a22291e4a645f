#!/usr/bin/env bash
# modern_moe.sh: issue 20 part 6 through the binary (docs/LLM.md, "Modern
# MoE"): DeepSeek-V3's published config.json imports with the report's 671B
# parameters (37B active) and simulates under megatron with expert
# parallelism; --moe-imbalance lengthens the step and is noted, F = 1 is the
# balanced schedule, other strategies refuse it; --expert-tensor-parallel
# below T lays out its groups; `stagger run` refuses the imbalance, expert
# tensor parallelism below T and multi-head latent attention (simulated
# only).
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
C=$SRC/models/clusters/dgx-h100.json
source "$SRC/tests/cli/lib/common.sh"

note() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['notes'].get(sys.argv[2], ''))" "$@"; }
step() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['step_time_s'])" "$1"; }

$STAGGER model import --hf $SRC/tests/data/hf/deepseek-v3.json --seq-len 4096 \
  --out "$tmp/dsv3.json" 2>"$tmp/warn" || { cat "$tmp/warn"; fail "DeepSeek-V3 import"; }
grep -q "multi-token prediction module is left out" "$tmp/warn" || fail "no MTP warning"
$STAGGER model show "$tmp/dsv3.json" >"$tmp/show"
grep -q "parameters   671,026,404,352" "$tmp/show" || fail "DeepSeek-V3 total"
grep -q "active       37,552,282,624" "$tmp/show" || fail "DeepSeek-V3 active"

# The whole model on 256 GPUs: PP 16 (balanced split of 61 layers), EP 16.
$STAGGER sim --model "$tmp/dsv3.json" --cluster $C --nodes 32 --strategy megatron \
  --pipeline-stages 16 --layer-split balanced --expert-parallel 16 --precision mixed \
  --micro-batch 1 --global-batch 256 >"$tmp/table" 2>"$tmp/err" ||
  { cat "$tmp/err"; fail "DeepSeek-V3 sim"; }
grep -q "EP 16" "$tmp/table" || fail "no EP in the layout"

# Imbalance: tiny-moe, EP 2 (one EP group per tensor pair).
MOE=$SRC/tests/data/exec/tiny-moe.json
sim() { $STAGGER sim --model $MOE --cluster $C --gpus 4 --strategy megatron --expert-parallel 2 \
  --tensor-parallel 2 --precision mixed --global-batch 8 --micro-batch 2 --steps 2 "$@"; }
sim --out "$tmp/even" >/dev/null 2>&1 || fail "balanced"
sim --moe-imbalance 1 --out "$tmp/one" >/dev/null 2>&1 || fail "F = 1"
sim --moe-imbalance 2 --out "$tmp/skew" >/dev/null 2>&1 || fail "F = 2"
[ "$(step "$tmp/even/report.json")" = "$(step "$tmp/one/report.json")" ] || fail "F = 1 changed"
python3 -c "import sys; sys.exit(not (float('$(step "$tmp/skew/report.json")') > float('$(step "$tmp/even/report.json")')))" ||
  fail "F = 2 is not slower"
[ "$(note "$tmp/skew/report.json" moe_imbalance)" = 2 ] || fail "moe_imbalance note"
[ -z "$(note "$tmp/even/report.json" moe_imbalance)" ] || fail "note without imbalance"
expect 2 "moe-imbalance: zero does not read it" \
  $STAGGER sim --model $MOE --cluster $C --gpus 2 --strategy zero --moe-imbalance 2
expect 1 "moe-imbalance" $STAGGER run --model $MOE --strategy megatron --expert-parallel 2 \
  --ranks 2 --steps 2 --backend host --moe-imbalance 2

# Expert tensor parallelism below T: whole experts (K = 1) with TP 2 + SP,
# one EP group of all 4 ranks; K = 2 of T = 4 adds the 'expert tp' groups.
sim_etp() { $STAGGER sim --cluster $C --strategy megatron --sequence-parallel --precision mixed \
  --micro-batch 2 --steps 2 "$@"; }
sim_etp --model $MOE --gpus 4 --tensor-parallel 2 --expert-tensor-parallel 1 --expert-parallel 4 \
  --global-batch 4 --out "$tmp/etp1" >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; fail "ETP 1"; }
[ "$(note "$tmp/etp1/report.json" expert_tensor_parallel)" = 1 ] || fail "expert_tensor_parallel note"
python3 - "$MOE" "$tmp/moe4.json" <<'P'
import json, sys
m = json.load(open(sys.argv[1]))
m["layers"][1]["layers"][0].pop("kv_heads")  # 4 heads, 4 key/value heads: T = 4 splits them
json.dump(m, open(sys.argv[2], "w"))
P
sim_etp --model "$tmp/moe4.json" --gpus 8 --tensor-parallel 4 --expert-tensor-parallel 2 \
  --expert-parallel 4 --global-batch 4 --out "$tmp/etp2" >/dev/null 2>"$tmp/err" ||
  { cat "$tmp/err"; fail "ETP 2 of TP 4"; }
head -1 "$tmp/etp2/groups.csv" | grep -q 'expert tp' || fail "no 'expert tp' group"
expect 1 "needs --sequence-parallel" $STAGGER sim --model $MOE --cluster $C --gpus 4 \
  --strategy megatron --tensor-parallel 2 --expert-tensor-parallel 1 --expert-parallel 2
expect 1 "expert-tensor-parallel other than" $STAGGER run --model $MOE --strategy megatron \
  --tensor-parallel 2 --sequence-parallel --expert-tensor-parallel 1 --expert-parallel 4 \
  --ranks 4 --steps 2 --backend host

# Multi-head latent attention is simulated only.
cat >"$tmp/mla.json" <<'J'
{"name": "tiny-mla", "input": [16], "layers": [
  {"name": "embed", "type": "embedding", "vocab": 64, "dim": 32},
  {"name": "b", "type": "mla_block", "heads": 4, "q_lora_rank": 16, "kv_lora_rank": 8,
   "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8, "ffn": 64},
  {"name": "norm", "type": "rmsnorm"},
  {"name": "lm_head", "type": "lm_head", "vocab": 64},
  {"name": "loss", "type": "softmax_cross_entropy"}]}
J
$STAGGER sim --model "$tmp/mla.json" --cluster $C --gpus 2 --strategy megatron \
  --tensor-parallel 2 >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; fail "MLA under TP 2"; }
expect 1 "mla_block" $STAGGER run --model "$tmp/mla.json" --strategy dp --ranks 1 --steps 2 \
  --backend host
echo "modern_moe: ok"
