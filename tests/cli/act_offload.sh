#!/usr/bin/env bash
# Activation offload to host, through the binary (docs/LLM.md, "Activation
# offload to host"): --offload-activations N on GPT-2 124M (s = 1024,
# h = 768, a = 12, dropout, bf16, one sequence per micro-batch, two
# micro-batches a step) against its closed forms, the notes, the
# refusals, and the executor's.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
M=$SRC/models/gpt2-124m.json
C=$SRC/models/clusters/dgx-h100.json
source "$SRC/tests/cli/lib/common.sh"

# acts DIR: the peak of activations on GPU 0 in DIR/report.json.
acts() { sed -n 's/.*"activations":[[:space:]]*\([0-9]*\),*$/\1/p' "$1/report.json" | head -1; }
# copied DIR WHAT: bytes of step 1's copies of activations WHAT (d2h, h2d).
copied() { awk -F, -v w="$2" '$6 == 1 && $8 == "COPY" && $9 == w && $10 ~ /acts/ { s += $14 }
  END { printf "%d\n", s }' "$1/ops.csv"; }
sim() { $STAGGER sim --model $M --cluster $C --gpus 1 --micro-batch 1 --global-batch 2 \
  --precision mixed --steps 2 "$@" >/dev/null; }

$STAGGER sim --help >"$tmp/help"
grep -q -- --offload-activations "$tmp/help" || fail "sim --help lacks --offload-activations"

# Each transformer layer saves, beside its input, kept = 32 s b h + 5 a s^2 b
# + 16 s b = 88,096,768 bytes; with N = 4 of them offloaded each step moves
# N x kept x M = 704,774,144 bytes down and as many back (M = 2), for dp,
# zero and a two-stage pipeline (N = 8 there: both stages' programs).
s=1024; h=768; a=12
kept=$(( 32 * s * h + 5 * a * s * s + 16 * s ))
for st in dp zero; do
  sim --strategy $st --offload-activations 4 --out "$tmp/$st"
  for w in d2h h2d; do
    [ "$(copied "$tmp/$st" $w)" -eq $(( 4 * kept * 2 )) ] ||
      fail "$st: $(copied "$tmp/$st" $w) bytes $w, wanted $(( 4 * kept * 2 ))"
  done
  grep -q '"offload_activation_bytes_per_micro":[[:space:]]*'$(( 4 * kept )) "$tmp/$st/report.json" ||
    fail "$st: note offload_activation_bytes_per_micro"
done
$STAGGER sim --model $M --cluster $C --gpus 2 --strategy pipeline --pipeline-stages 2 \
  --micro-batch 1 --global-batch 2 --precision mixed --steps 2 --offload-activations 8 \
  --out "$tmp/pipe" >/dev/null
for w in d2h h2d; do
  [ "$(copied "$tmp/pipe" $w)" -eq $(( 8 * kept * 2 )) ] ||
    fail "pipeline: $(copied "$tmp/pipe" $w) bytes $w, wanted $(( 8 * kept * 2 ))"
done

# The device's activation peak drops (by at most the offloaded blocks: on
# 64 GB/s PCIe the copies lag the compute; test_act_offload.c checks the
# exact N x kept with PCIe made instant), and the step grows.
sim --strategy dp --out "$tmp/none"
sim --strategy dp --offload-activations 12 --out "$tmp/all"
[ "$(acts "$tmp/all")" -lt "$(acts "$tmp/none")" ] || fail "offloading all 12: no lower peak"
[ "$(acts "$tmp/all")" -ge $(( $(acts "$tmp/none") - 12 * kept )) ] ||
  fail "offloading all 12: the peak dropped more than the blocks offloaded"

# Refused: strategies that do not model it, more layers than the model's,
# layers that keep nothing to offload, and the executor.
expect 2 "offload-activations: megatron does not read it; it applies to dp,zero,pipeline" \
  $STAGGER sim --model $M --cluster $C --gpus 1 --strategy megatron --offload-activations 2
expect 1 "has 12 transformer layers" sim --strategy dp --offload-activations 13
expect 1 "keeps no saved block" sim --strategy dp --offload-activations 1 --recompute full
expect 1 "activation offload to host" \
  $STAGGER run --model $M --cluster $C --gpus 1 --ranks 1 --micro-batch 1 --steps 2 \
  --backend host --offload-activations 2
echo "act_offload: ok"
