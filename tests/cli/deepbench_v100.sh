#!/usr/bin/env bash
# The V100's 16-bit GEMM and convolution efficiencies (models/gpus/v100-sxm2.json)
# against DeepBench's measurements on a V100 (baidu-research/DeepBench,
# results/train/DeepBench_NV_V100.xlsx: CUDA 10.1, cuDNN 7.6.2; the rows in
# traces/reference/deepbench/):
# 1. the largest GEMM of the sweep, 4096 x 7000 x 4096 in 2.092 ms, simulated
#    as a linear layer's forward, within 5 %;
# 2. the convolution efficiency in the file is what scripts/fit_conv_deepbench.py
#    fits to the measured convolutions (mean ln(predicted / measured) 0 over
#    the rows of 0.3 ms or more), and their spread stays under 0.3;
# 3. the mechanism moves a real run the way the measurement says: ResNet-50 AMP on
#    one V100 (NVIDIA DeepLearningExamples: 1200 images/s at batch 256, 213 ms)
#    is predicted within 5 % from the published numbers alone, where the file's
#    earlier 16-bit figures (Markidis et al. 2018's GEMM share, taken for the
#    convolutions too) made it 7.5 % slow.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v jq >/dev/null || { echo "SKIP: jq is not installed"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 is not installed"; exit 77; }
C=$SRC/models/clusters/dgx-v100.json
GPU=$SRC/models/gpus/v100-sxm2.json

# 1. The GEMM.
cat >"$tmp/gemm.json" <<'EOF'
{"name": "gemm", "input": [4096], "layers": [{"name": "pre", "type": "relu"},
 {"name": "fc", "type": "linear", "out_features": 4096, "bias": false}]}
EOF
"$STAGGER" sim --model "$tmp/gemm.json" --cluster "$C" --gpus 1 --precision mixed \
  --optimizer sgd --micro-batch 7000 --calibration none --out "$tmp/g" >/dev/null 2>&1
fwd=$(awk -F, '$11 == "fc" && $9 == "fwd" { print $18 / 1000 }' "$tmp/g/ops.csv")
echo "GEMM 4096 x 7000 x 4096: simulated $fwd ms, DeepBench 2.092 ms"
awk -v s="$fwd" 'BEGIN { exit !(s / 2.092 - 1 < 0.05 && 2.092 / s - 1 < 0.05) }' ||
  fail "the GEMM is $fwd ms, not within 5 % of 2.092"

# 2. The convolutions: the file holds the fit.
out=$(python3 "$SRC/scripts/fit_conv_deepbench.py" "$STAGGER")
echo "$out"
fitted=$(sed -n 's/.*conv.efficiency.16bit \([0-9.]*\),.*/\1/p' <<<"$out")
sd=$(sed -n 's/.* sd \([0-9.]*\).*/\1/p' <<<"$out")
held=$(jq '.conv.efficiency["16bit"]' "$GPU")
awk -v a="$fitted" -v b="$held" 'BEGIN { d = a - b; exit !(d < 0.005 && d > -0.005) }' ||
  fail "the file holds $held, DeepBench's convolutions fit $fitted"
awk -v s="$sd" 'BEGIN { exit !(s < 0.3) }' || fail "the spread over the rows is $sd"

# 3. ResNet-50 AMP on one V100.
"$STAGGER" sim --model "$SRC/models/resnet50.json" --cluster "$C" --gpus 1 --precision mixed \
  --optimizer sgd --micro-batch 256 --framework pytorch --memory-format nhwc \
  --calibration none --out "$tmp/rn" >/dev/null 2>&1
step=$(jq .step_time_s "$tmp/rn/report.json")
echo "ResNet-50 AMP, one V100: simulated $step s, measured 0.2133 s"
awk -v s="$step" 'BEGIN { exit !(s / 0.2133 - 1 < 0.05 && 0.2133 / s - 1 < 0.05) }' ||
  fail "ResNet-50 on one V100 is $step s, not within 5 % of 0.2133"
echo "ok"
