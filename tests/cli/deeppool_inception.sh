#!/usr/bin/env bash
# Inception-v3 under burst parallelism, end to end (docs/DEEPPOOL.md, the
# opening table): DeepPool's A100 profile imported onto models/inception_v3.json,
# then dp and burst at a global batch of 32 on one DGX A100. The plan packs
# branches of the Inception modules on GPUs of their own, its predicted step
# is within 5 % of the simulated one (for dp too), and burst beats dp.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$SRC/tests/cli/lib/common.sh"

M=$SRC/models/inception_v3.json
C=$SRC/models/clusters/dgx-a100.json
P=$tmp/a100-deeppool-inception.json
$STAGGER profile import deeppool "$SRC/traces/reference/deeppool/inceptionLayerGpuProfileA100.txt" \
  --model "$M" --out "$P" >"$tmp/import"
grep -q "1000 rows over 8 batch sizes -> 496 entries" "$tmp/import" || fail "import summary"
grep -q "roofline estimates): loss$" "$tmp/import" || fail "a layer besides the loss lacks a row"
command -v jq >/dev/null || { echo "jq not installed: the plan's checks skipped"; exit 0; }
cmp -s <(jq -S . "$P") <(jq -S . "$SRC/traces/profiles/a100-deeppool-inception.json") ||
  fail "the committed profile is not what the import writes"

$STAGGER sim --model "$M" --cluster $C --profile "$P" --strategy dp,burst --global-batch 32 \
  --gpus 8 --micro-batch 4 --out "$tmp/runs" >"$tmp/table" 2>"$tmp/log"
R=$tmp/runs/burst/report.json
for run in dp burst; do
  [ -f "$tmp/runs/$run/report.json" ] || fail "no report for $run"
done
within5() { awk -v a="$1" -v b="$2" 'BEGIN { d = a / b - 1; exit !(d < 0.05 && d > -0.05) }'; }
step() { jq -r .step_time_s "$tmp/runs/$1/report.json"; }
planned=$(jq -r .notes.planned_step_s "$R")
planned_dp=$(jq -r .notes.planned_dp_step_s "$R")
within5 "$planned" "$(step burst)" || fail "burst planned $planned s, simulated $(step burst) s"
within5 "$planned_dp" "$(step dp)" || fail "dp planned $planned_dp s, simulated $(step dp) s"
awk -v b="$(step burst)" -v d="$(step dp)" 'BEGIN { exit !(b < d) }' ||
  fail "burst $(step burst) s is not faster than dp $(step dp) s"
packed=$(jq -r .notes.packed_branches "$R")
[ "$packed" -gt 0 ] || fail "no branch packed"
jq -r .notes.burst_plan "$R" | grep -q "Mixed_[0-9a-z.]*_[0-9a-z_]*:[0-9]@[1-7]" ||
  fail "the plan names no branch on other GPUs: $(jq -r .notes.burst_plan "$R")"
# Packing is what makes burst win here: every set from rank 0 plans slower than dp.
awk -v u="$(jq -r .notes.planned_unpacked_step_s "$R")" -v d="$planned_dp" \
  'BEGIN { exit !(u > d) }' || fail "the unpacked plan is not slower than dp"
