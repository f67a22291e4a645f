#!/usr/bin/env bash
# context_parallel.sh: megatron's --context-parallel through the binary, as
# docs/LLM.md ("Context parallelism") runs it: Llama-3 70B at 128K tokens
# on 256 H100s (TP 8 + SP x CP 16 x DP 2), what the report and groups.csv
# say of the "cp" group (the ring's bytes per step in closed form), the
# planner over --context-parallel 1,2,4, and what is refused: other
# strategies, all-to-all with too few kv heads, a sequence not cut in 2C
# chunks. (`stagger run` runs it: exec_context_parallel.sh.)
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
C=$SRC/models/clusters/dgx-h100.json
source "$SRC/tests/cli/lib/common.sh"

# A number from report.json's notes.
note() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['notes'][sys.argv[2]])" "$@"; }

$STAGGER sim --model $SRC/models/llama-3-70b.json --cluster $C --nodes 32 --strategy megatron \
  --tensor-parallel 8 --sequence-parallel --context-parallel 16 --seq-len 131072 \
  --precision mixed --zero-stage 1 --micro-batch 1 --global-batch 16 --out "$tmp/l70" \
  >"$tmp/table" 2>"$tmp/err" || { cat "$tmp/err"; fail "128K with CP 16"; }
grep -q "TP 8 + SP x CP 16 (ring) x PP 1 x DP 2" "$tmp/table" || fail "no layout in the table"
grep -q "out of memory      no" "$tmp/table" || fail "128K at CP 16 should fit"
[ "$(note "$tmp/l70/report.json" context_parallel)" = 16 ] || fail "context_parallel note"
# Per rank and step: 80 layers x 8 micro-batches x 3 (c - 1) chunks of K =
# 2 (8 / 8 kv heads) x 128 x 8192 tokens x 2 bytes = 4 MiB (forward c - 1,
# backward 2 (c - 1)).
want=$((80 * 8 * 3 * 15 * 2 * 128 * 8192 * 2))
got=$(note "$tmp/l70/report.json" cp_bytes_per_gpu_stage0)
python3 -c "import sys; sys.exit(abs(float('$got') - $want) > 0.5)" ||
  fail "cp bytes $got, want $want"
head -1 "$tmp/l70/groups.csv" | grep -q ',cp,' || fail "no cp column in groups.csv"
awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "cp") c = i } NR > 1 && $c > 0 { n++ }
  END { exit n > 0 ? 0 : 1 }' "$tmp/l70/groups.csv" || fail "the cp group carried nothing"

# Without CP the same layout cannot hold 128K tokens' activations.
$STAGGER sim --model $SRC/models/llama-3-70b.json --cluster $C --nodes 2 --strategy megatron \
  --tensor-parallel 8 --sequence-parallel --seq-len 131072 --precision mixed --zero-stage 1 \
  --micro-batch 1 --global-batch 2 --steps 1 >"$tmp/nocp" 2>/dev/null || true
grep -q "out of memory      YES" "$tmp/nocp" || fail "128K without CP should not fit"

# The planner searches the sizes listed, and the table says them.
cat >"$tmp/m.json" <<'JSON'
{"name": "small-llama", "input": [8192], "dtype": "bf16", "layers": [
 {"name": "embed", "type": "embedding", "vocab": 32000, "dim": 1024},
 {"repeat": 8, "layers": [{"name": "layers.{i}", "type": "llama_block", "heads": 16,
   "kv_heads": 4, "ffn": 2816}]},
 {"name": "norm", "type": "rmsnorm"},
 {"name": "lm_head", "type": "lm_head", "vocab": 32000},
 {"name": "loss", "type": "softmax_cross_entropy"}]}
JSON
$STAGGER plan --model "$tmp/m.json" --cluster $C --nodes 1-2 --global-batch 16 \
  --precision mixed --strategy megatron --tensor-parallel 1,2 --context-parallel 1,2,4 \
  --micro-batch 1 --threads 2 --out "$tmp/p" >"$tmp/plan" 2>/dev/null
grep -q "context-parallel=4" "$tmp/plan" || fail "CP 4 not in the plan"
grep -q "^Winner: megatron" "$tmp/plan" || fail "no winner"

# Refusals.
L8=$SRC/models/llama-3-8b.json
expect 2 "context-parallel: dp does not read it; it applies to megatron" \
  $STAGGER sim --model $L8 --cluster $C --gpus 4 --strategy dp --context-parallel 2
expect 1 "kv_heads are not a multiple of t x c" $STAGGER sim --model $L8 --cluster $C \
  --nodes 2 --strategy megatron --tensor-parallel 8 --context-parallel 2 --cp-comm all-to-all
expect 1 "not a multiple of 2 x 2" $STAGGER sim --model $L8 --cluster $C --gpus 2 \
  --strategy megatron --context-parallel 2 --seq-len 8190
echo ok
