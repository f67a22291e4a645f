#!/usr/bin/env bash
# Activation checkpointing as frameworks do it, through the binary
# (docs/LLM.md): --recompute-every K and --recompute-ops against their
# closed forms on GPT-3 1.3B (s = h = 2048, a = 16, dropout, bf16, one
# sequence per micro-batch), the refusals, and the executor's.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
M=$SRC/models/gpt3-1.3b.json
C=$SRC/models/clusters/dgx-h100.json
source "$SRC/tests/cli/lib/common.sh"

# acts DIR: the peak of activations on GPU 0 in DIR/report.json.
acts() { sed -n 's/.*"activations":[[:space:]]*\([0-9]*\),*$/\1/p' "$1/report.json" | head -1; }
# recomputes DIR: recompute ops of one step (two steps run).
recomputes() { echo $(( $(grep -c ',COMP,recompute,' "$1/ops.csv") / 2 )); }
sim() { $STAGGER sim --model $M --cluster $C --gpus 1 --strategy dp --micro-batch 1 \
  --precision mixed --steps 2 "$@" >/dev/null; }

$STAGGER sim --help >"$tmp/help"
for o in --recompute-every --recompute-ops; do
  grep -q -- "$o" "$tmp/help" || fail "sim --help lacks $o"
done

# Every K-th transformer layer (torchtitan's ac_freq): of 24 blocks, K = 2
# checkpoints 12 and the other 12 keep what no recomputation keeps. Each of
# those holds 34 s b h + 5 a s^2 b + 16 s b (the norms' fp32 statistics)
# where a checkpointed one holds its input, 2 s b h:
#   acts(K=2) - acts(K=1) = 12 (32 s b h + 5 a s^2 b + 16 s b) = 5,637,537,792,
# and a step recomputes 24 layers at K = 1, 12 at K = 2.
sim --recompute full --recompute-every 1 --out "$tmp/k1"
sim --recompute full --recompute-every 2 --out "$tmp/k2"
s=2048; h=2048; a=16
want=$(( 12 * (32 * s * h + 5 * a * s * s + 16 * s) ))
got=$(( $(acts "$tmp/k2") - $(acts "$tmp/k1") ))
[ "$got" -eq "$want" ] || fail "every 2 against every 1: $got bytes, wanted $want"
[ "$(recomputes "$tmp/k1")" -eq 24 ] || fail "every 1: $(recomputes "$tmp/k1") recomputes a step"
[ "$(recomputes "$tmp/k2")" -eq 12 ] || fail "every 2: $(recomputes "$tmp/k2") recomputes a step"

# Selective by op (Megatron-LM's --recompute-modules): mlp_act drops each
# block's GELU output, s b 4h x 2 bytes = 8 s b h, layernorm its two norms'
# outputs, 4 s b h: over 24 blocks 805,306,368 and 402,653,184 bytes.
sim --recompute selective --out "$tmp/core"
sim --recompute selective --recompute-ops core_attn+mlp_act --out "$tmp/mlp"
sim --recompute selective --recompute-ops core_attn+mlp_act+layernorm --out "$tmp/all"
got=$(( $(acts "$tmp/core") - $(acts "$tmp/mlp") ))
[ "$got" -eq $(( 24 * 8 * s * h )) ] || fail "mlp_act dropped $got bytes"
got=$(( $(acts "$tmp/mlp") - $(acts "$tmp/all") ))
[ "$got" -eq $(( 24 * 4 * s * h )) ] || fail "layernorm dropped $got bytes"
[ "$(recomputes "$tmp/all")" -eq 24 ] || fail "selective: $(recomputes "$tmp/all") recomputes"
# The schedule says which ops its recomputes make, and reads back the same
# (stagger sim --schedule: the same peak).
$STAGGER schedule --model $M --cluster $C --gpus 1 --strategy dp --micro-batch 1 \
  --precision mixed --steps 2 --recompute selective \
  --recompute-ops core_attn+mlp_act+layernorm -o "$tmp/s.json" >/dev/null 2>&1
grep -q '"recompute_ops":[[:space:]]*"core_attn+mlp_act+layernorm"' "$tmp/s.json" ||
  fail "the schedule lacks recompute_ops"
$STAGGER sim --schedule "$tmp/s.json" --out "$tmp/back" >/dev/null 2>&1
[ "$(acts "$tmp/back")" -eq "$(acts "$tmp/all")" ] || fail "read back: another peak"

# Refusals, each naming what to change.
expect 2 "recompute-every" $STAGGER sim --model $M --cluster $C --gpus 1 --recompute-every 0
expect 2 "recompute-ops" $STAGGER sim --model $M --cluster $C --gpus 1 --recompute-ops gelu
expect 1 "give --recompute full" $STAGGER sim --model $M --cluster $C --gpus 1 \
  --recompute-every 2
expect 1 "give --recompute selective" $STAGGER sim --model $M --cluster $C --gpus 1 \
  --recompute full --recompute-ops mlp_act
expect 1 "has 24 transformer layers" $STAGGER sim --model $M --cluster $C --gpus 1 \
  --recompute full --recompute-every 25
expect 1 "recompute-ops mlp_act or layernorm" $STAGGER sim --model $SRC/models/llama-3-8b.json \
  --cluster $C --gpus 1 --recompute selective

# The executor runs every-K checkpointing, and refuses the ops it cannot
# make again.
G=$SRC/tests/data/memory/gpt.json
$STAGGER run --model $G --ranks 1 --micro-batch 2 --steps 1 --backend host \
  --recompute full --recompute-every 2 >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; fail "run every 2"; }
expect 1 "recompute-ops other than core_attn" $STAGGER run --model $G --ranks 1 --micro-batch 2 \
  --steps 1 --backend host --recompute selective --recompute-ops core_attn+mlp_act
echo ok
