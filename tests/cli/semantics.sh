#!/usr/bin/env bash
# Training semantics through the binary: --list-strategies says what update
# each strategy computes, the planner excludes stale updates unless
# --allow-stale, and marks what it ranks in the table, plan.json and plan.csv.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
M=$SRC/models/mlp.json
C=$SRC/models/clusters/dgx-h100.json
fail() { echo "FAIL: $*" >&2; exit 1; }

$STAGGER sim --list-strategies >"$tmp/list"
grep -A3 "^cdp " "$tmp/list" | grep -q "update: stale: delayed gradients" || fail "cdp is not stale"
grep -A3 "^cdp " "$tmp/list" | grep -q "with --update-rule dp, sync" || fail "cdp dp is not sync"
grep -A3 "^dp " "$tmp/list" | grep -q "update: sync.*--sparsity P > 0, pruned" || fail "dp update"
grep -q -- "--allow-stale" <<<"$($STAGGER plan --help-all)" || fail "plan --help lacks --allow-stale"

# By default the stale rules are excluded, not simulated.
$STAGGER plan --model $M --cluster $C --gpus 4 --strategy dp,cdp --micro-batch 8 --stages 2 \
  --out "$tmp/sync" >"$tmp/table" 2>/dev/null
grep -q "excluded (stale updates: --allow-stale admits them)" "$tmp/table" || fail "no excluded count"
grep -q "rank  strategy   update" "$tmp/table" || fail "no update column"
! grep -q " stale " "$tmp/table" || fail "a stale configuration was ranked"
grep -q '"status":[[:space:]]*"excluded"' "$tmp/sync/plan.json" || fail "plan.json: no excluded point"

# --allow-stale ranks them, marked.
$STAGGER plan --model $M --cluster $C --gpus 4 --strategy dp,cdp --micro-batch 8 --stages 2 \
  --allow-stale --out "$tmp/all" >"$tmp/table" 2>/dev/null
grep -q " cdp  *stale " "$tmp/table" || fail "no stale row with --allow-stale"
! grep -q '"status":[[:space:]]*"excluded"' "$tmp/all/plan.json" || fail "excluded with --allow-stale"
grep -q ",stale,\"update-rule=v1" "$tmp/all/plan.csv" || fail "plan.csv does not mark stale rows"
echo ok
