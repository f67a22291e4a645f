#!/usr/bin/env bash
# `stagger plan` prunes data-parallel configurations by their closed form
# before building them (issue 22 part 2): on the MLP over 1-3000 nodes of 8
# H100s, 21,000 configurations, only the first wave is built and simulated;
# every other point is pruned unbuilt (bound null) with its closed form in
# plan.json and its reason; the winner and the GPU front are those of the
# search over 1-24 nodes with pruning off, whose points are a prefix of it.
# Counts of work, never seconds.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$SRC/tests/cli/lib/common.sh"
args=(--model "$SRC/models/mlp.json" --cluster "$SRC/models/clusters/dgx-h100.json"
      --strategy dp --threads 2 -q)

$STAGGER plan "${args[@]}" --nodes 1-3000 --out "$tmp/big" >"$tmp/big.txt"
p="$tmp/big/plan.json"
jq -e '.counts.configurations == 21000' "$p" >/dev/null || fail "space: $(jq -c .counts "$p")"
built=$(jq '[.points[] | select(.bound != null)] | length' "$p")
[ "$built" -le 32 ] || fail "$built schedules built for 21000 configurations"
jq -e '.counts.pruned + .counts.simulated == .counts.configurations' "$p" >/dev/null ||
  fail "counts: $(jq -c .counts "$p")"
jq -e '[.points[] | select(.status == "pruned" and .bound == null)] | length > 20000 and
       all(.[]; (.reason | test("closed form")) and (.reason | test("not built"))
                and .estimate.closed_form_step_s > 0)' "$p" >/dev/null ||
  fail "unbuilt pruned points lack their closed form: $(jq -c '[.points[] | select(.status == "pruned")][0]' "$p")"
# Every point simulated has a closed form under its step.
jq -e '[.points[] | select(.simulated)] | all(.[]; .estimate.closed_form_step_s > 0 and
       .estimate.closed_form_step_s <= .step_time_s)' "$p" >/dev/null ||
  fail "a closed form above its simulated step"

# The same winner and front as no pruning on a prefix of the space.
$STAGGER plan "${args[@]}" --nodes 1-24 --prune off --out "$tmp/off" >/dev/null
o="$tmp/off/plan.json"
[ "$(jq .winner "$p")" = "$(jq .winner "$o")" ] ||
  fail "winner $(jq .winner "$p") against $(jq .winner "$o") unpruned"
[ "$(jq -c '[.points[] | select(.pareto_gpus) | .index]' "$p")" = \
  "$(jq -c '[.points[] | select(.pareto_gpus) | .index]' "$o")" ] || fail "the GPU fronts differ"
