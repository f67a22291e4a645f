#!/usr/bin/env bash
# Tensor, sequence and expert parallelism run for real through the binary,
# as a user runs it: `stagger run --strategy megatron --tensor-parallel 2`
# on the host backend trains tiny-llama with the same losses per step as
# `--strategy dp` on the same global batch (Megatron's vocabulary padding,
# 64 to 256, left out of the softmax), also from a stored schedule; and
# `--expert-parallel 2` trains tiny-moe as DP does.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
M=$SRC/tests/data/exec/tiny-llama.json
C=$SRC/models/clusters/dgx-h100.json
fail() { echo "FAIL: $*" >&2; exit 1; }

# losses DIR: the report's losses, one a line.
losses() { sed -n 's/.*"loss":[[:space:]]*\[\(.*\)\].*/\1/p' "$1/report.json" | tr ',' '\n'; }

# agree A B: the same number of steps, every loss within 1e-5 relative.
agree() {
  paste <(losses "$1") <(losses "$2") | awk -v a="$1" -v b="$2" '
    { n++; d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * ($2 < 0 ? -$2 : $2)) bad = 1 }
    END { if (n < 2 || bad) { printf "losses of %s and %s differ\n", a, b > "/dev/stderr"; exit 1 } }'
}

$STAGGER run --model $M --strategy dp --ranks 2 --steps 3 --backend host --out "$tmp/dp" \
  >/dev/null 2>&1
$STAGGER run --model $M --strategy megatron --tensor-parallel 2 --ranks 4 --steps 3 \
  --backend host --out "$tmp/tp" >"$tmp/table" 2>"$tmp/err" || { cat "$tmp/err"; fail "TP 2 run"; }
grep -q "TP 2 x PP 1 x DP 2" "$tmp/table" || fail "no layout in the table"
grep -q '"vocab_padded":[[:space:]]*256' "$tmp/tp/report.json" || fail "vocabulary not padded"
[ "$(losses "$tmp/tp" | wc -l)" = 3 ] || fail "not one loss per step"
agree "$tmp/tp" "$tmp/dp" || fail "TP 2 does not train as DP"

# With sequence parallelism, from a stored schedule.
$STAGGER schedule --model $M --cluster $C --gpus 4 --strategy megatron --tensor-parallel 2 \
  --sequence-parallel --steps 3 --out "$tmp/s.json" >/dev/null
$STAGGER run --schedule "$tmp/s.json" --backend host --out "$tmp/sp" >/dev/null 2>&1 \
  || fail "TP 2 + SP from a schedule"
agree "$tmp/sp" "$tmp/dp" || fail "TP 2 + SP does not train as DP"

# --vocab-multiple 1 keeps the vocabulary of 64: the same losses again.
$STAGGER run --model $M --strategy megatron --tensor-parallel 2 --ranks 4 --steps 3 \
  --vocab-multiple 1 --backend host --out "$tmp/v1" >/dev/null 2>&1
agree "$tmp/v1" "$tmp/dp" || fail "--vocab-multiple 1"
# The check can fail: another seed's run is another run.
$STAGGER run --model $M --strategy megatron --tensor-parallel 2 --ranks 4 --steps 3 --seed 7 \
  --backend host --out "$tmp/s7" >/dev/null 2>&1
! agree "$tmp/s7" "$tmp/dp" 2>/dev/null || fail "the comparison accepts another seed's losses"
# Uneven pipeline stages (Megatron-LM's first/last-stage layer counts, its
# accounting of the embedding, and the FLOPs-balanced split): tiny-llama
# with three blocks on two stages, 1 + 2 or 2 + 1, trains as DP does.
sed 's/"repeat": 2/"repeat": 3/' "$M" >"$tmp/tl3.json"
$STAGGER run --model "$tmp/tl3.json" --strategy dp --ranks 1 --steps 3 --backend host \
  --out "$tmp/tl3-dp" >/dev/null 2>&1
for split in "--first-stage-layers 1:1,2" "--last-stage-layers 1:2,1" \
             "--account-for-embedding:1,2" "--layer-split balanced:2,1"; do
  # shellcheck disable=SC2086
  $STAGGER run --model "$tmp/tl3.json" --strategy megatron --pipeline-stages 2 ${split%%:*} \
    --ranks 2 --steps 3 --backend host --out "$tmp/uneven" >/dev/null 2>"$tmp/err" \
    || { cat "$tmp/err"; fail "uneven stages: ${split%%:*}"; }
  grep -q "\"stage_transformer_layers\":[[:space:]]*\"${split##*:}\"" "$tmp/uneven/report.json" \
    || fail "stages of ${split%%:*}: wanted ${split##*:}"
  agree "$tmp/uneven" "$tmp/tl3-dp" || fail "${split%%:*} does not train as DP"
done

# Expert parallelism: tiny-moe's 4 experts over 2 ranks, all-to-alls on 'ep'.
MOE=$SRC/tests/data/exec/tiny-moe.json
$STAGGER run --model $MOE --strategy dp --ranks 2 --steps 3 --backend host --out "$tmp/moe-dp" \
  >/dev/null 2>&1
$STAGGER run --model $MOE --strategy megatron --expert-parallel 2 --ranks 2 --steps 3 \
  --backend host --out "$tmp/ep" >"$tmp/table" 2>"$tmp/err" || { cat "$tmp/err"; fail "EP 2 run"; }
grep -q "EP 2" "$tmp/table" || fail "no EP in the layout"
agree "$tmp/ep" "$tmp/moe-dp" || fail "EP 2 does not train as DP"
echo ok
