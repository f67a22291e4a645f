#!/usr/bin/env bash
# Llama 3 405B on 16,384 H100s through the binary (docs/GOODPUT.md): Megatron
# TP 8 x PP 16 x DP 128 with the distributed optimizer (ZeRO 1), 8K
# sequences, 2,048 per step (Llama 3 paper, Table 4), trained on 15.6T tokens,
# checkpoints spread over every rank. The training run's interruptions per
# 54 days must match the 54-day snapshot of the Llama 3 paper (Dubey et al.
# 2024, section 3.3.4 and Table 5: 466 interruptions, 419 unexpected) within
# Poisson's 3 sigma, and its effective training time the paper's "higher
# than 90 %".
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$SRC/tests/cli/lib/common.sh"

$STAGGER sim --model "$SRC/models/llama-3-405b.json" --cluster "$SRC/models/clusters/dgx-h100.json" \
  --nodes 2048 --strategy megatron --tensor-parallel 8 --pipeline-stages 16 \
  --account-for-embedding --account-for-loss --sequence-parallel --zero-stage 1 --seq-len 8192 \
  --precision mixed --micro-batch 1 --global-batch 2048 --steps 2 \
  --train-tokens 15.6T --checkpoint-writers spread --run-trials 50 --out "$tmp/l405" \
  >"$tmp/out.txt" 2>"$tmp/err.txt" || { cat "$tmp/err.txt" >&2; fail "the 405B run failed"; }
python3 - "$tmp/l405/report.json" <<'P' || fail "the 405B run disagrees with Llama 3's published figures"
import json, math, sys
report = json.load(open(sys.argv[1]))
assert report["gpus_used"] == 16384
r = report["run"]
days = r["wall_s"] / 86400
per_54 = r["interruptions"] * 54 / days
unexpected = (r["interruptions"] - r["interruptions_by_cause"]["planned"]) * 54 / days
print(f"{days:.1f} days, {per_54:.0f} interruptions per 54 days ({unexpected:.0f} unexpected), "
      f"goodput {r['goodput']:.3f}, effective {r['effective_training_time']:.3f}", file=sys.stderr)
assert abs(per_54 - 466) < 3 * math.sqrt(466), per_54
assert abs(unexpected - 419) < 3 * math.sqrt(419), unexpected
assert 0.90 < r["effective_training_time"] < 0.99, r["effective_training_time"]
assert r["goodput"] < r["effective_training_time"]
assert r["checkpoint"]["writers"] == 16384
P
echo "ok"
