#!/usr/bin/env bash
# The LLM options through the binary: --seq-len and --recompute in --help,
# bad values named once, a selective recomputation's recompute ops in
# ops.csv (GPT blocks with dense attention, two of them), a sequence length
# that changes the model's FLOPs, and the tiny LLaMA trained on the host
# with full recomputation.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
C=$SRC/models/clusters/dgx-h100.json
source "$SRC/tests/cli/lib/common.sh"

for cmd in "sim --help" "run --help" "plan --help-search"; do
  $STAGGER $cmd >"$tmp/help"
  for o in --seq-len --recompute; do
    grep -q -- "$o" "$tmp/help" || fail "$cmd lacks $o"
  done
done

expect 2 "--recompute bogus: must be one of none|selective|full" \
  $STAGGER sim --model "$SRC/tests/data/exec/tiny-llama.json" --cluster "$C" --recompute bogus
expect 1 "not a sequence of token ids" \
  $STAGGER sim --model "$SRC/models/resnet18.json" --cluster "$C" --gpus 1 --seq-len 64 \
  --out "$tmp/img"
expect 1 "key 'positions'" \
  $STAGGER sim --model "$SRC/tests/data/exec/tiny-gpt.json" --cluster "$C" --gpus 1 \
  --seq-len 64 --out "$tmp/gpt"

# Selective: one recompute op per dense attention block (2) and micro-batch.
$STAGGER sim --model "$SRC/tests/data/memory/gpt.json" --cluster "$C" --gpus 1 \
  --micro-batch 2 --recompute selective --out "$tmp/sel" >/dev/null 2>&1
n=$(grep -c ',COMP,recompute,' "$tmp/sel/ops.csv")
[ "$n" -eq 2 ] || fail "selective: $n recompute ops, wanted 2"
# Full: one per layer (8).
$STAGGER sim --model "$SRC/tests/data/memory/gpt.json" --cluster "$C" --gpus 1 \
  --micro-batch 2 --recompute full --out "$tmp/full" >/dev/null 2>&1
n=$(grep -c ',COMP,recompute,' "$tmp/full/ops.csv")
[ "$n" -eq 8 ] || fail "full: $n recompute ops, wanted 8"

# --seq-len: the schedule's model reads 64 tokens instead of 16.
$STAGGER schedule --model "$SRC/tests/data/exec/tiny-llama.json" --cluster "$C" --gpus 1 \
  --micro-batch 1 --seq-len 64 --out "$tmp/s64.json" >/dev/null 2>&1
grep -q '"input":' "$tmp/s64.json" || fail "schedule has no input shape"
tr -d ' \t\n' <"$tmp/s64.json" | grep -q '"input":\[64\]' || fail "--seq-len 64 not in the schedule"

# The tiny LLaMA trains on the host with full recomputation.
$STAGGER run --model "$SRC/tests/data/exec/tiny-llama.json" --strategy dp --ranks 2 \
  --backend host --steps 2 --micro-batch 4 --recompute full --out "$tmp/run" >/dev/null 2>&1
grep -q '"loss"' "$tmp/run/report.json" || fail "run report has no loss"
# The zoo: published counts in `model show`; Mixtral's active share.
$STAGGER model show "$SRC/models/llama-3-70b.json" >"$tmp/show"
grep -q "parameters   70,553,706,496" "$tmp/show" || fail "llama-3-70b count"
$STAGGER model show "$SRC/models/mixtral-8x7b.json" >"$tmp/show"
grep -q "active       12,879,925,248" "$tmp/show" || fail "mixtral active count"

# Llama-3 8B, ZeRO-3 on 8 H100s at 8192 tokens, no recomputation (flash
# attention keeps no scores, so selective would drop nothing and is
# refused: tests/cli/first_contact.sh): fp32 does not fit in 80 GiB (said,
# not hidden), mixed precision does (tests/test_zoo.c works it by hand).
$STAGGER sim --model "$SRC/models/llama-3-8b.json" --cluster "$C" --strategy zero \
  --zero-stage 3 --seq-len 8192 --micro-batch 1 --out "$tmp/l3" \
  >/dev/null 2>&1
grep -q '"out_of_memory":[[:space:]]*{' "$tmp/l3/report.json" || fail "fp32 should not fit"
$STAGGER sim --model "$SRC/models/llama-3-8b.json" --cluster "$C" --strategy zero \
  --zero-stage 3 --seq-len 8192 --micro-batch 1 --precision mixed \
  --out "$tmp/l3m" >/dev/null 2>&1
grep -q '"out_of_memory":[[:space:]]*null' "$tmp/l3m/report.json" || fail "mixed should fit"

# The tiny LLaMA learns with the defaults: its loss falls.
$STAGGER run --model "$SRC/tests/data/exec/tiny-llama.json" --strategy dp --ranks 2 \
  --backend host --out "$tmp/learn" >/dev/null 2>&1
losses=$(tr -d ' \t\n' <"$tmp/learn/report.json" | sed -n 's/.*"loss":\[\([^]]*\)\].*/\1/p')
first=${losses%%,*}; last=${losses##*,}
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || fail "loss did not fall: $losses"
echo "ok"
