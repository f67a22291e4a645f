#!/usr/bin/env bash
# What a new user meets first (issue 27), through the binary: headline
# numbers with their convention and their error, option lists searched
# whole, recompute modes that mean something, zero sizes refused, the
# capacity on the memory plot, distinct layouts compared, and the host
# profile's origin on validate.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
C=$SRC/models/clusters/dgx-h100.json
source "$SRC/tests/cli/lib/common.sh"

# ---- zero sizes: refused by sim, schedule and plan alike, never the default 8 GPUs.
for opt in nodes gpus ranks; do
  expect 2 "--$opt 0: must be between 1" \
    $STAGGER sim --model $SRC/models/mlp.json --cluster $C --$opt 0 --steps 2
  expect 2 "--$opt 0: must be between 1" \
    $STAGGER schedule --model $SRC/models/mlp.json --cluster $C --$opt 0 --out "$tmp/s.json"
done
expect 2 "--nodes 0" $STAGGER plan --model $SRC/models/mlp.json --cluster $C --nodes 0 -q
expect 2 "--gpus 0" $STAGGER plan --model $SRC/models/mlp.json --cluster $C --gpus 0 -q
# ... and 1 is still a size.
$STAGGER sim --model $SRC/models/mlp.json --cluster $C --gpus 1 --steps 2 >"$tmp/out" 2>/dev/null
grep -q "on 1 GPU " "$tmp/out" || fail "--gpus 1 did not run on one GPU"

# ---- plan: a list option is searched whole for every strategy that reads it.
# GPT-3 1.3B under ZeRO-3 at micro-batch 16 fits 40 GiB only with full
# recomputation: with the list, zero must try all three and rank the one
# that fits, as --recompute full alone does.
plan_zero() { # RECOMPUTE-LIST OUT
  $STAGGER plan --model $SRC/models/gpt3-1.3b.json --cluster $C --strategy zero --zero-stage 3 \
    --recompute "$1" --nodes 1 --micro-batch 16 --precision mixed --mem-cap 40GiB \
    --out "$2" >"$2.txt" 2>/dev/null
}
plan_zero full "$tmp/pfull"
plan_zero none,selective,full "$tmp/plist"
grep -q "^ *1 *zero .*recompute=full" "$tmp/plist.txt" || { cat "$tmp/plist.txt" >&2; fail "plan with the list ranks no zero with recompute=full"; }
for r in none selective full; do
  jq -e --arg r "$r" '[.points[] | select(.settings.recompute == $r)] | length == 1' \
    "$tmp/plist/plan.json" >/dev/null || fail "plan.json lacks the one configuration with recompute=$r"
done
full=$(jq -r '.points[] | select(.settings.recompute == "full") | .step_time_s' "$tmp/plist/plan.json")
alone=$(jq -r '.points[0].step_time_s' "$tmp/pfull/plan.json")
[ "$full" = "$alone" ] || fail "recompute=full in the list ($full s) is not --recompute full alone ($alone s)"
# The same for the other options a strategy reads without varying them by
# default: --pipeline-stages for pipeline, --zero-stage for cdp.
$STAGGER plan --model $SRC/models/mlp.json --cluster $C --strategy pipeline --pipeline-stages 2,4 \
  --pipeline-schedule 1f1b --balance time --recompute none --nodes 1 --micro-batch 8 \
  --out "$tmp/ppipe" >/dev/null 2>&1
for p in 2 4; do
  jq -e --arg p "$p" '[.points[] | select(.settings["pipeline-stages"] == $p)] | length == 1' \
    "$tmp/ppipe/plan.json" >/dev/null || fail "pipeline searched no --pipeline-stages $p"
done
$STAGGER plan --model $SRC/models/mlp.json --cluster $C --strategy cdp --zero-stage 1,2 \
  --update-rule dp --stages 2 --cdp-reduce chain --recompute none \
  --nodes 1 --micro-batch 8 --out "$tmp/pcdp" >/dev/null 2>&1
for z in 1 2; do
  jq -e --arg z "$z" '[.points[] | select(.settings["zero-stage"] == $z)] | length == 2' \
    "$tmp/pcdp/plan.json" >/dev/null || fail "cdp searched no --zero-stage $z"
done

# ---- each recompute mode changes what the layers keep, or is refused.
# GPT-2's dense attention keeps its scores: selective drops them, full
# keeps only each block's input, so activations fall from none to selective
# to full.
acts() { # MODEL MODE: GPU 0's activation peak in bytes
  $STAGGER sim --model "$SRC/models/$1.json" --cluster $C --gpus 1 --micro-batch 4 \
    --precision mixed --recompute "$2" --steps 2 --out "$tmp/rc-$1-$2" >/dev/null 2>&1
  jq '.devices[0].peak_by_category.activations' "$tmp/rc-$1-$2/report.json"
}
none=$(acts gpt2-124m none); sel=$(acts gpt2-124m selective); full=$(acts gpt2-124m full)
[ "$sel" -lt "$none" ] || fail "gpt2-124m: selective keeps $sel bytes, none $none"
[ "$full" -lt "$sel" ] || fail "gpt2-124m: full keeps $full bytes, selective $sel"
# Llama's flash attention keeps no scores: selective would change nothing,
# and is refused with the reason; full still changes what is kept.
for m in llama-2-7b mistral-7b; do
  expect 1 "recompute selective.*no layer of '$m'.*flash attention keeps none" \
    $STAGGER sim --model "$SRC/models/$m.json" --cluster $C --gpus 1 --micro-batch 1 \
    --precision mixed --recompute selective --steps 2
done
none=$(acts llama-2-7b none); full=$(acts llama-2-7b full)
[ "$full" -lt "$none" ] || fail "llama-2-7b: full keeps $full bytes, none $none"
# The planner gives the same reason for every strategy that would try it.
$STAGGER plan --model $SRC/models/llama-2-7b.json --cluster $C --strategy zero,megatron \
  --recompute none,selective --tensor-parallel 1 --pipeline-stages 1 --virtual-stages 1 \
  --zero-stage 1 --nodes 1 \
  --micro-batch 1 --precision mixed --out "$tmp/prc" >/dev/null 2>&1
for s in zero megatron; do
  jq -e --arg s "$s" '[.points[] | select(.strategy == $s and .settings.recompute == "selective")
      | select(.status == "infeasible" and (.reason | test("flash attention keeps none")))]
      | length == 1' "$tmp/prc/plan.json" >/dev/null || fail "plan: $s with selective on llama not refused"
done

# ---- the plan compares distinct layouts: no runner-up that is the winner
# under another name. Selective recomputation on Llama changes nothing, so
# zero with it would build the winner again with empty recompute ops and a
# made-up difference; it is refused, and the runner-up differs in more than
# the recompute mode.
$STAGGER plan --model "$SRC/models/llama-2-7b.json" --cluster $C --strategy zero \
  --recompute none,selective --zero-stage 1,2 --micro-batch 1 --global-batch 16 \
  --precision mixed --nodes 1 --out "$tmp/pwin" >"$tmp/pwin.txt" 2>/dev/null
jq -e '.winner != null and .runner_up != null and
  (.points[.winner].settings | del(.recompute)) != (.points[.runner_up].settings | del(.recompute))' \
  "$tmp/pwin/plan.json" >/dev/null || { grep -A2 "^Winner\|^Runner" "$tmp/pwin.txt" >&2; fail "the runner-up is the winner under another name"; }
jq -e '[.points[] | select(.status == "ok" and .settings.recompute == "selective")] | length == 0' \
  "$tmp/pwin/plan.json" >/dev/null || fail "a selective twin was simulated"

# ---- headline numbers: MFU with its convention and how far it may be off.
# Model FLOPs per step = the model's forward + backward (model show's
# totals) x the global batch, for a tensor-parallel run too (the whole
# model, not one rank's share, its vocabulary padded as Megatron-LM pads it:
# 32000 to 32768, 0.04 % more FLOPs); MFU = that / (GPUs x peak x step).
L=$SRC/models/llama-2-7b.json
per_sample=$($STAGGER model show --json "$L" | jq '.totals.fwd_flops + .totals.bwd_flops')
check_mfu() { # DIR GLOBAL-BATCH TOLERANCE
  jq -e --argjson f "$per_sample" --argjson b "$2" --argjson tol "$3" '
    (.mfu.model_flops_per_step / ($f * $b) - 1 | fabs) < $tol and
    (.mfu.value / (.mfu.model_flops_per_step /
       (.gpus_used * .mfu.peak_flops_per_gpu * .step_time_s)) - 1 | fabs) < 1e-6 and
    .mfu.peak_dtype == "bf16" and .mfu.value > 0.05 and .mfu.value < 1' "$1/report.json" >/dev/null \
    || { jq .mfu "$1/report.json" >&2; fail "$1: MFU is not model FLOPs over peak x GPUs x step"; }
}
$STAGGER sim --model "$L" --cluster $C --strategy zero --zero-stage 3 --precision mixed \
  --micro-batch 1 --global-batch 16 --out "$tmp/mz" >"$tmp/mz.txt" 2>/dev/null
check_mfu "$tmp/mz" 16 1e-9
$STAGGER sim --model "$L" --cluster $C --strategy megatron --tensor-parallel 8 --precision mixed \
  --micro-batch 1 --global-batch 8 --out "$tmp/mt" >"$tmp/mt.txt" 2>/dev/null
check_mfu "$tmp/mt" 8 1e-3
# The summary prints it with the peak and the convention, and how far the
# prediction has been off: the calibration's own count of runs.
n=$(jq '.step_time.n' "$SRC/models/calibration/default.json")
grep -Eq "^  MFU  +[0-9.]+ % of 8 x 989 TFLOP/s \(bf16 dense peak\).*model FLOPs per step \(forward \+ backward" \
  "$tmp/mz.txt" || { cat "$tmp/mz.txt" >&2; fail "sim prints no MFU with its peak and convention"; }
grep -q "how sure .*predicted, not measured.*on the $n published runs .* off by [0-9]* % rms" \
  "$tmp/mz.txt" || fail "sim does not say how far the step and MFU have been off ($n runs)"
$STAGGER sim --model "$L" --cluster $C --strategy zero --precision mixed --micro-batch 1 \
  --calibration none >"$tmp/mn.txt" 2>/dev/null
grep -q "how sure .*no calibration stands behind it" "$tmp/mn.txt" || fail "--calibration none: no caveat"
# Side by side: an MFU row and the note under the table.
$STAGGER sim --model $SRC/models/resnet50.json --cluster $C --strategy dp,zero --steps 3 \
  --micro-batch 32 >"$tmp/cmp.txt" 2>/dev/null
grep -Eq "^MFU +[0-9.]+ % +[0-9.]+ %" "$tmp/cmp.txt" || fail "the comparison has no MFU row"
grep -q "^Step time and MFU are predicted, not measured: on the $n published runs" "$tmp/cmp.txt" \
  || fail "the comparison does not say how far it may be off"
# The intervals' cells do not run into each other.
grep -Eq "^  90 % interval +[0-9.]+ [mun]?s\.\.[0-9.]+ [mun]?s +[0-9.]+" "$tmp/cmp.txt" \
  || { grep interval "$tmp/cmp.txt" >&2; fail "interval cells run together"; }
# plan: an MFU column, in plan.json too, and the same caveat.
grep -Eq "^ *rank .* MFU .*peak" "$tmp/plist.txt" || fail "the plan table has no MFU column"
grep -Eq "^ +1 +zero .* [0-9.]+% " "$tmp/plist.txt" || fail "the plan's winner has no MFU"
jq -e '[.points[] | select(.status == "ok") | .mfu > 0] | all' "$tmp/plist/plan.json" >/dev/null \
  || fail "plan.json: a simulated point without its MFU"
grep -q "^Step times and MFU are predicted, not measured: on the $n published runs" \
  "$tmp/plist.txt" || fail "the plan does not say how far it may be off"

# ---- the memory plot holds the run to the GPU's capacity.
# GPT-3 2.7B under plain DP at micro-batch 16 needs hundreds of GiB: the
# plot draws the capacity (report.json's, in the key) and marks the device
# that goes over at its peak as the device shows it, and says so in its
# heading; a run that fits has the line and no mark.
if [[ -n "${GNUPLOT:-}" ]]; then
  $STAGGER sim --model $SRC/models/gpt3-2.7b.json --cluster $C --strategy dp --precision mixed \
    --micro-batch 16 --steps 2 --out "$tmp/oom" >/dev/null 2>&1
  $STAGGER sim --model $SRC/models/mlp.json --cluster $C --steps 2 --out "$tmp/fits" >/dev/null 2>&1
  for d in oom fits; do $STAGGER plot "$tmp/$d" --format svg >/dev/null; done
  gib() { awk -v b="$1" -v f="$2" 'BEGIN { printf f, b / 1073741824 }'; }
  cap=$(gib "$(jq '.gpu_memory_bytes' "$tmp/oom/report.json")" "%.3g")
  over=$(gib "$(jq '.out_of_memory.peak_bytes' "$tmp/oom/report.json")" "%.2f")
  dev=$(jq '.out_of_memory.device' "$tmp/oom/report.json")
  grep -q "capacity $cap GiB" "$tmp/oom/memory.svg" || fail "the OOM plot draws no capacity ($cap GiB)"
  grep -q "OUT OF MEMORY: $over GiB on the device" "$tmp/oom/memory.svg" \
    || fail "the OOM plot marks no peak over the capacity ($over GiB)"
  grep -q "OUT OF MEMORY: GPU $dev peaks at $over GiB" "$tmp/oom/memory.svg" \
    || fail "the OOM plot's heading does not say which GPU goes over"
  grep -q "capacity $cap GiB" "$tmp/fits/memory.svg" || fail "a fitting run's plot has no capacity"
  ! grep -q "OUT OF MEMORY" "$tmp/fits/memory.svg" || fail "a fitting run's plot says out of memory"
else
  echo "no gnuplot: the memory plot's checks skipped"
fi

# ---- validate says where its profile was measured, against what ran.
# The shipped host profile, relabelled as another machine's: a warning that
# the errors measure the two machines, and how to profile this one; labelled
# as this machine's kind ("host: N CPU cores"), a note naming both.
validate_with() { # MACHINE OUT
  rm -rf "$tmp/prof"; cp -r "$SRC/traces/profiles/host" "$tmp/prof"
  sed -i "s/\"machine\":.*/\"machine\": \"$1\",/" "$tmp/prof"/*.json
  $STAGGER validate --model $SRC/models/mlp.json --strategy dp --ranks 1 --micro-batch 16 \
    --steps 2 --backend host --profile "$tmp/prof" >"$2" 2>/dev/null
}
validate_with "host: 9999 CPU cores (Elsewhere 1), reference kernels" "$tmp/v-other.txt"
grep -q "^WARNING: the profile was measured on another machine: .*'host: 9999 CPU cores (Elsewhere 1)" \
  "$tmp/v-other.txt" || { cat "$tmp/v-other.txt" >&2; fail "validate does not warn of a profile from elsewhere"; }
grep -q "Profile this machine first" "$tmp/v-other.txt" || fail "validate does not say to profile first"
grep -q "stagger profile --model .*mlp.json .*--backend host" "$tmp/v-other.txt" \
  || fail "validate gives no profile command"
validate_with "host: $(nproc) CPU cores (Here 1), reference kernels" "$tmp/v-here.txt"
grep -q "^note: .*'host: $(nproc) CPU cores (Here 1), reference kernels'.*ran on 'host: $(nproc) CPU cores" \
  "$tmp/v-here.txt" || { cat "$tmp/v-here.txt" >&2; fail "validate does not name the profile's machine"; }
! grep -q "WARNING" "$tmp/v-here.txt" || fail "validate warns of a profile of this machine's kind"

echo "first contact: all checks passed"
