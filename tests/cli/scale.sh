#!/usr/bin/env bash
# Folded runs at scale (issue 22, docs/PERFORMANCE.md "At a million GPUs"):
# GPT-3 2.7B ZeRO-3 on 131,072 and 1,048,576 H100s predicts what it did
# before the engine, the links, the fold and the summary stopped keeping
# state per rank and per link. The numbers are pinned from the commit before
# that work (81cfcc5); a change here is a change of prediction, not of speed.
# Not timed: docs/PERFORMANCE.md and build/tests/bench_sim --scale measure.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$SRC/tests/cli/lib/common.sh"

RUN=(--model "$SRC/models/gpt3-2.7b.json" --cluster "$SRC/models/clusters/dgx-h100.json"
     --strategy zero --zero-stage 3 --micro-batch 1 --precision mixed --steps 1
     --calibration none)

# 131,072 GPUs: the report's figures, exactly.
$STAGGER sim "${RUN[@]}" --nodes 16384 --out "$tmp/z" >"$tmp/out" 2>"$tmp/err" ||
  { cat "$tmp/err" >&2; fail "sim on 131072 GPUs failed"; }
grep -q "1 of 131072 ranks simulated (identical ranks folded)" "$tmp/err" ||
  fail "131072 identical ranks are not folded into one"
# One read of the report (131,072 device entries, 80 MB).
python3 - "$tmp/z/report.json" <<'PY' || fail "131072 GPUs: the report changed"
import json, sys
r = json.load(open(sys.argv[1]))
d = r["devices"][-1]
want = [("step_time_s", r["step_time_s"], 11.941083247),
        ("total_peak_bytes", r["total_peak_bytes"], 3832937864757248),
        ("memory_peak", r["memory_peak"],
         {"allocated": 29276549616, "reserved": 33668032059, "device": 35681297979}),
        ("gpus_used", r["gpus_used"], 131072),
        ("comm bytes_total", r["comm"]["bytes_total"], 2152703728706560),
        ("devices", len(r["devices"]), 131072),
        ("last device represented_by", d["represented_by"], 0),
        ("last device peak_bytes", d["peak_bytes"], 29242995184),
        ("last device activations at its peak", d["at_peak_by_category"]["activations"],
         27185389568),
        ("last device peak_time_s", d["peak_time_s"], 6.420875128),
        ("last device busy_fraction", d["busy_fraction"], 0.008632411471203605)]
bad = [f"{k} is {got}, was {was}" for k, got, was in want if got != was]
print("\n".join(bad), file=sys.stderr)
sys.exit(1 if bad else 0)
PY

# 1,048,576 GPUs: the printed figures (a report.json would list a million
# devices).
$STAGGER sim "${RUN[@]}" --nodes 131072 >"$tmp/out" 2>"$tmp/err" ||
  { cat "$tmp/err" >&2; fail "sim on 1048576 GPUs failed"; }
grep -q "1 of 1048576 ranks simulated (identical ranks folded)" "$tmp/err" ||
  fail "1048576 identical ranks are not folded into one"
for line in "step time          95.090 s" "throughput         11027.2 samples/s on 1048576 GPUs" \
            "peak memory/GPU    27.23 GiB on GPU 0" \
            "as it shows      27.27 GiB allocated, 31.36 GiB reserved, 33.23 GiB on the device" \
            "communication      15.30 PiB per step over all GPUs; peak/mean 2084.30" \
            "exposed 94.987 s per step on GPU 0"; do
  grep -qF "$line" "$tmp/out" || { cat "$tmp/out" >&2; fail "1048576 GPUs: no '$line'"; }
done
echo "ok"
