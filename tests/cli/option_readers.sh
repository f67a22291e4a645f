#!/usr/bin/env bash
# Options a strategy does not read (issue 23): given to a run none of whose
# strategies reads them, they are refused as bad usage naming the
# strategies they apply to, in sim, run, validate and schedule; given beside
# a strategy that reads them, they are taken.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$SRC/tests/cli/lib/common.sh"

M="--model $SRC/models/mlp.json --cluster $SRC/models/clusters/dgx-h100.json --gpus 2"
expect 2 "tensor-parallel: dp does not read it; it applies to megatron" \
  $STAGGER sim $M --strategy dp --tensor-parallel 2
expect 2 "moe-imbalance: dp does not read it; it applies to megatron" \
  $STAGGER sim $M --strategy dp --moe-imbalance 1.5
expect 2 "stages: pipeline does not read it; it applies to cdp" \
  $STAGGER sim $M --strategy pipeline --stages 2
expect 2 "amp-limit: dp,zero does not read it; it applies to burst,multiplex" \
  $STAGGER sim $M --strategy dp,zero --amp-limit 3
expect 2 "background: burst does not read it" \
  $STAGGER sim $M --strategy burst --background mlp:b4
expect 2 "tensor-parallel: dp does not read it" \
  $STAGGER run --model $SRC/models/mlp.json --ranks 2 --steps 2 --backend host --tensor-parallel 2
expect 2 "update-rule: dp does not read it" \
  $STAGGER validate --model $SRC/models/mlp.json --ranks 1 --steps 2 --backend host \
  --profile $SRC/traces/profiles/host --update-rule v2
expect 2 "pipeline-stages: zero does not read it" \
  $STAGGER schedule $M --strategy zero --pipeline-stages 2 --out "$tmp/s.json"
# Read by one strategy of the run: taken (dp ignores it beside burst).
$STAGGER sim $M --strategy dp,burst --amp-limit 3 >"$tmp/out" 2>&1 || fail "dp,burst --amp-limit"
$STAGGER sim $M --strategy pipeline --pipeline-stages 2 >"$tmp/out" 2>&1 || fail "pipeline-stages"
# Options every strategy reads stay accepted.
$STAGGER sim $M --strategy cdp --precision mixed --optimizer sgd >"$tmp/out" 2>&1 ||
  fail "common options refused"
echo "option_readers: ok"
