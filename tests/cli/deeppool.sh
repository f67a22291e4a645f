#!/usr/bin/env bash
# DeepPool through the binary: `stagger profile import deeppool`, then burst
# and multiplex on the imported A100 profile, as docs/DEEPPOOL.md runs them;
# bad usage exits 2, a bad --background exits 1 naming it. The profiles are
# in traces/reference/deeppool/.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$SRC/tests/cli/lib/common.sh"

# Help and usage (output captured first: grep -q may close the pipe early).
$STAGGER profile --help >"$tmp/help"
grep -q "import deeppool FILE" "$tmp/help" || fail "profile --help lacks import deeppool"
$STAGGER sim --list-strategies >"$tmp/list"
grep -q "^burst" "$tmp/list" || fail "--list-strategies lacks burst"
grep -q "^multiplex" "$tmp/list" || fail "--list-strategies lacks multiplex"
expect 2 "missing command" $STAGGER profile
expect 2 "expected import" $STAGGER profile frobnicate
expect 2 "expected deeppool" $STAGGER profile import caffe x.txt --model vgg16 --out x.json
expect 2 "missing FILE" $STAGGER profile import deeppool --model vgg16 --out x.json
expect 2 "are required" $STAGGER profile import deeppool x.txt

M=$SRC/models/vgg16.json
C=$SRC/models/clusters/dgx-a100.json
expect 1 "background vgg16:16" $STAGGER sim --model $SRC/models/mlp.json --cluster $C \
  --gpus 2 --strategy multiplex --background vgg16:16
expect 1 "no model 'nosuch'" $STAGGER sim --model $SRC/models/mlp.json --cluster $C \
  --gpus 2 --strategy multiplex --background nosuch:b4
expect 2 "unknown GPU sharing model (known: interference, priority)" $STAGGER sim --model $M \
  --cluster $C --strategy multiplex --share-model fair

DATA=$SRC/traces/reference/deeppool

P=$tmp/a100-deeppool-vgg16.json
$STAGGER profile import deeppool "$DATA/vggLayerGpuProfileA100.txt" --model vgg16 --out "$P" \
  >"$tmp/import"
grep -q "176 rows over 8 batch sizes -> 144 entries" "$tmp/import" || fail "import summary"
grep -q "relu1_1" "$tmp/import" || fail "import does not list the layers without a row"
grep -q '"pass":[[:space:]]*"fwd+bwd"' "$P" || fail "no fwd+bwd entries"

# The issue's commands: burst beside dp, then multiplexed with a background job.
$STAGGER sim --model $M --cluster $C --profile "$P" --strategy dp,burst,multiplex \
  --foreground burst --background vgg16:b16 --global-batch 32 --gpus 8 --micro-batch 4 \
  --amp-limit 2.0 --steps 4 --out "$tmp/runs" >"$tmp/table" 2>"$tmp/log"
for run in dp burst multiplex; do
  [ -f "$tmp/runs/$run/report.json" ] || fail "no report for $run"
done
R=$tmp/runs/burst/report.json
grep -q '"burst_plan":' "$R" || fail "burst report lacks its plan"
grep -q '"planned_dp_iteration_s":' "$R" || fail "burst report lacks the planned DP iteration"
grep -q '"profiled":\|"interpolated":' "$R" || fail "burst did not use the profile"
X=$tmp/runs/multiplex/report.json
for key in foreground_slowdown foreground_alone_step_time_s cluster_samples_per_s \
           gpu_idle_fraction gpu_idle_fraction_alone samples_per_s; do
  grep -q "\"$key\":" "$X" || fail "multiplex report lacks $key"
done
grep -q '"name":[[:space:]]*"vgg16:b16:local"' "$X" || fail "multiplex report lacks its job"

# The plan's predicted step against the simulated one (issue 21: they
# disagreed by 13 %): within 5 % for burst and for data parallelism, on
# DeepPool's VGG-16 and WRN-101-2 profiles at a global batch of 32; burst
# beats data parallelism on VGG-16 at 8 GPUs (DeepPool's claim), and on 16
# GPUs without a limit the plan widens to all of them.
within5() { awk -v a="$1" -v b="$2" 'BEGIN { d = a / b - 1; exit !(d < 0.05 && d > -0.05) }'; }
planned() { jq -r ".notes.$2" "$1/burst/report.json"; }
step() { jq -r .step_time_s "$1/$2/report.json"; }
if command -v jq >/dev/null; then
  W=$tmp/a100-deeppool-wrn.json
  $STAGGER profile import deeppool "$DATA/wrnLayerGpuProfileA100V2.txt" --model wide_resnet101_2 \
    --out "$W" >/dev/null
  $STAGGER sim --model $SRC/models/wide_resnet101_2.json --cluster $C --profile "$W" \
    --strategy dp,burst --global-batch 32 --gpus 8 --micro-batch 4 --out "$tmp/wrn" >/dev/null 2>&1
  $STAGGER sim --model $M --cluster $C --nodes 2 --profile "$P" --strategy dp,burst \
    --global-batch 32 --micro-batch 2 --amp-limit 100 --out "$tmp/wide" >/dev/null 2>&1
  for run in "$tmp/runs" "$tmp/wrn" "$tmp/wide"; do
    within5 "$(planned "$run" planned_step_s)" "$(step "$run" burst)" ||
      fail "$run: burst planned $(planned "$run" planned_step_s) s, simulated $(step "$run" burst) s"
    within5 "$(planned "$run" planned_dp_step_s)" "$(step "$run" dp)" ||
      fail "$run: dp planned $(planned "$run" planned_dp_step_s) s, simulated $(step "$run" dp) s"
  done
  awk -v b="$(step "$tmp/runs" burst)" -v d="$(step "$tmp/runs" dp)" 'BEGIN { exit !(b < d) }' ||
    fail "VGG-16, 8 GPUs: burst $(step "$tmp/runs" burst) s is not faster than dp $(step "$tmp/runs" dp) s"
  grep -q "layers on [0-9]*-16 GPUs" <(jq -r .description "$tmp/wide/burst/report.json") ||
    fail "16 GPUs, no limit: the plan does not widen to 16 ($(jq -r .description "$tmp/wide/burst/report.json"))"
fi

# Deterministic: the same run writes the same report.
$STAGGER sim --model $M --cluster $C --profile "$P" --strategy multiplex \
  --background vgg16:b16 --global-batch 32 --gpus 8 --micro-batch 4 --steps 4 \
  --out "$tmp/again" >/dev/null 2>&1
cmp -s "$X" "$tmp/again/report.json" || fail "multiplex report differs between two runs"

# GPU sharing (docs/DEEPPOOL.md section 6): the default interference model
# slows the foreground beside its background; --share-model priority is the
# leak-free model, under which it runs as alone; an unknown model is bad usage.
slowdown() { jq -r .multiplex.foreground_slowdown "$1"; }
if command -v jq >/dev/null; then
  $STAGGER sim --model $M --cluster $C --profile "$P" --strategy multiplex \
    --background vgg16:b16 --global-batch 32 --gpus 8 --micro-batch 4 --steps 4 \
    --share-model priority --out "$tmp/prio" >/dev/null 2>&1
  awk -v s="$(slowdown "$X")" 'BEGIN { exit !(s > 1.01) }' || fail "interference: slowdown $(slowdown "$X")"
  awk -v s="$(slowdown "$tmp/prio/report.json")" 'BEGIN { exit !(s == 1) }' ||
    fail "priority: slowdown $(slowdown "$tmp/prio/report.json")"
fi
echo "ok"
