#!/usr/bin/env bash
# --defer-grad-sync through the binary (FSDP2's set_requires_gradient_sync
# (False) until the last micro-batch, NeMo Automodel's default
# defer_fsdp_grad_sync): Llama-3 70B under ZeRO-3 on 64 H100s with 4
# micro-batches per step. Deferred, every rank holds the model's whole
# gradient in fp32 (70.6 G elements x 4 bytes) and runs out of memory;
# reduced every micro-batch it fits. Automodel's own 70B benchmark recipe says
# the same (examples/llm_benchmark/llama3_3/
# custom_llama3_1_70b_pretrain_benchmark_8nodes.yaml: "defer_fsdp_grad_sync:
# False  # Must be False with GA>1: True -> ... OOM"). Deferred, the
# reduce-scatters run once per step instead of four times. The same recipe
# sets reshard_after_forward True because "the prior default retained enough
# all-gathers to OOM": with --reshard backward every GPU holds the whole
# 16-bit model at the forward's end (141 GB) and runs out of memory too.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$SRC/tests/cli/lib/common.sh"
field() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }

grep -q -- "--defer-grad-sync" <<<"$($STAGGER sim --help)" || fail "sim --help lacks --defer-grad-sync"

RUN=(--model "$SRC/models/llama-3-70b.json" --cluster "$SRC/models/clusters/dgx-h100.json"
     --strategy zero --zero-stage 3 --nodes 8 --micro-batch 1 --global-batch 256
     --precision mixed --framework automodel --recompute full)
$STAGGER sim "${RUN[@]}" --out "$tmp/auto" >/dev/null 2>&1
$STAGGER sim "${RUN[@]}" --defer-grad-sync on --out "$tmp/on" >/dev/null 2>&1
$STAGGER sim "${RUN[@]}" --defer-grad-sync off --out "$tmp/off" >/dev/null 2>&1
$STAGGER sim "${RUN[@]}" --defer-grad-sync off --reshard backward --out "$tmp/kept" >/dev/null 2>&1

[ "$(field "$tmp/on/report.json" "r['out_of_memory'] is not None")" = True ] ||
  fail "deferred: predicted to fit, with the whole fp32 gradient on every GPU"
[ "$(field "$tmp/off/report.json" "r['out_of_memory'] is None")" = True ] ||
  fail "reduced every micro-batch: predicted out of memory"
[ "$(field "$tmp/kept/report.json" "r['out_of_memory'] is not None")" = True ] ||
  fail "gathered parameters kept to the backward: predicted to fit"
# automodel defers by default.
[ "$(field "$tmp/auto/report.json" "r['total_peak_bytes']")" = \
  "$(field "$tmp/on/report.json" "r['total_peak_bytes']")" ] || fail "automodel does not defer by default"
# The gradients at the peak: at least the whole model in fp32 (70.6e9 x 4 bytes).
python3 - "$tmp/on/report.json" "$tmp/off/report.json" <<'PY' || fail "gradients or communication"
import json, sys
on, off = (json.load(open(p)) for p in sys.argv[1:3])
whole = 70.55e9 * 4
peak_on = on["total_peak_by_category"]["grads"] / on["gpus_used"]
assert peak_on >= 0.95 * whole, f"deferred gradients {peak_on:.3g} B per GPU, under the model's {whole:.3g}"
# Three reduce-scatters of four gone: less communication.
assert on["comm"]["bytes_total"] < off["comm"]["bytes_total"], "deferred moves no fewer bytes"
PY
expect 2 "must be one of" $STAGGER sim "${RUN[@]}" --defer-grad-sync maybe
echo "ok"
