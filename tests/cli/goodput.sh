#!/usr/bin/env bash
# A whole training run through the binary (docs/GOODPUT.md): `sim
# --train-tokens` prints the training-run block, report.json gains `run`
# whose parts add up to its wall time, the CSVs the plots read are written,
# a seed reproduces the numbers, the cluster file's storage and power
# entries are read, and bad input is refused naming the option.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
M=$SRC/models/gpt2-124m.json
H100=$SRC/models/clusters/dgx-h100.json
source "$SRC/tests/cli/lib/common.sh"

field() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }

grep -q -- "--train-tokens" <<<"$($STAGGER sim --help-all)" || fail "sim --help-all lacks --train-tokens"

# Failures often enough that a short run sees several: 1 per GPU per 5 h.
cat >"$tmp/rates.json" <<'J'
{"gpu_per_h": 0.2, "node_per_h": 0, "link_per_h": 0, "software_per_h": 0.01,
 "planned_per_h": 0, "source": "a test's elevated rates"}
J
RUN=(--model "$M" --cluster "$H100" --strategy dp --precision mixed --micro-batch 4 --steps 3
     --train-tokens 20B --failure-rates "$tmp/rates.json" --run-trials 50
     --price-gpu-hour 2 --price-kwh 0.1)
$STAGGER sim "${RUN[@]}" --out "$tmp/a" >"$tmp/a.txt" 2>/dev/null
grep -q "^training run" "$tmp/a.txt" || fail "the summary lacks the training-run block"
grep -q "goodput" "$tmp/a.txt" || fail "the summary lacks the goodput"
R=$tmp/a/report.json
python3 - "$R" <<'P' || fail "report.json's run object is not whole"
import json, sys
r = json.load(open(sys.argv[1]))["run"]
assert 0 < r["goodput"] < 1, r["goodput"]
assert abs(sum(r["parts_s"].values()) - r["wall_s"]) < 1e-6 * r["wall_s"]
assert r["interruptions"] > 0
assert r["checkpoint"]["writers"] == 1          # dp: one shard, written by rank 0
assert r["checkpoint"]["copies"] > 7.9          # 8 replicas
assert r["cost"] > 0 and r["energy_kwh"] > 0
assert "a test's elevated rates" in r["failure_rates_source"]
P
[ -s "$tmp/a/goodput.csv" ] || fail "goodput.csv missing"
[ "$(head -1 "$tmp/a/run_timeline.csv")" = "t_h,event,durable_work_h" ] || fail "run_timeline.csv header"

# The plots of the run, where gnuplot is installed.
if command -v gnuplot >/dev/null 2>&1; then
  $STAGGER plot "$tmp/a" >/dev/null 2>&1 || fail "stagger plot failed on a training run"
  [ -s "$tmp/a/goodput.png" ] && [ -s "$tmp/a/run_timeline.png" ] || fail "no goodput / run_timeline plots"
fi

# A seed reproduces the run; another seed gives another.
$STAGGER sim "${RUN[@]}" --out "$tmp/b" >/dev/null 2>&1
$STAGGER sim "${RUN[@]}" --seed 9 --out "$tmp/c" >/dev/null 2>&1
w() { field "$1/report.json" "repr(r['run']['wall_s'])"; }
[ "$(w "$tmp/a")" = "$(w "$tmp/b")" ] || fail "the same seed gave another wall time"
[ "$(w "$tmp/a")" != "$(w "$tmp/c")" ] || fail "another seed gave the same wall time"
# (Seed 1's first trial, the one the timeline shows, happens to run clean.)
grep -q ",gpu," "$tmp/c/run_timeline.csv" || fail "the timeline shows no GPU failure"

# The cluster file's storage tiers and power.
python3 - "$H100" "$tmp/site.json" <<'P'
import json, sys
c = json.load(open(sys.argv[1]))
c["storage"] = [{"name": "fast", "write": "100GB/s", "read": "100GB/s"},
                {"name": "slow", "write": "100MB/s", "read": "100MB/s", "max_writers": 1}]
c["power"] = {"gpu_busy_w": 500, "gpu_comm_w": 200, "gpu_idle_w": 50, "node_w": 1000, "pue": 1.5}
json.dump(c, open(sys.argv[2], "w"))
P
SITE=("${RUN[@]/$H100/$tmp/site.json}")
$STAGGER sim "${SITE[@]}" --storage slow --out "$tmp/slow" >/dev/null 2>&1
$STAGGER sim "${SITE[@]}" --out "$tmp/fast" >/dev/null 2>&1
[ "$(field "$tmp/slow/report.json" "r['run']['checkpoint']['storage']")" = slow ] || fail "--storage slow not taken"
[ "$(field "$tmp/fast/report.json" "r['run']['checkpoint']['storage']")" = fast ] || fail "the first tier is not the default"
python3 -c "import sys; sys.exit(0 if $(field "$tmp/slow/report.json" "r['run']['checkpoint']['stall_s']") > 10 * $(field "$tmp/fast/report.json" "r['run']['checkpoint']['stall_s']") else 1)" ||
  fail "a slow tier does not stall longer"
python3 -c "import sys; sys.exit(0 if $(field "$tmp/fast/report.json" "r['run']['gpu_power_w']") <= 500 else 1)" ||
  fail "the cluster file's power is not used"

# Cyclic DP's stale update (rule v1) tolerates a step of delay: it pays
# less for its slowest GPU than DDP's synchronous step.
$STAGGER sim --model "$M" --cluster "$H100" --strategy cdp,dp --precision mixed --micro-batch 4 \
  --steps 8 --train-tokens 1B --run-trials 5 --out "$tmp/cdp" >"$tmp/cdp.txt" 2>/dev/null
grep -q "^first to finish: " "$tmp/cdp.txt" || fail "side by side, the runs are not compared"
python3 - "$tmp/cdp" <<'P' || fail "cdp's stale update does not absorb stragglers"
import json, sys
cdp = json.load(open(sys.argv[1] + "/cdp/report.json"))["run"]
dp = json.load(open(sys.argv[1] + "/dp/report.json"))["run"]
assert cdp["straggler_slack_steps"] == 1 and dp["straggler_slack_steps"] == 0
assert 1 < cdp["straggler_factor"] < dp["straggler_factor"], (cdp, dp)
P

# Refused, naming the option.
expect 2 "train-tokens" $STAGGER sim "${RUN[@]}" --train-tokens 0
expect 2 "train-tokens" $STAGGER sim "${RUN[@]}" --train-tokens -3T
expect 2 "first or spread" $STAGGER sim "${RUN[@]}" --checkpoint-writers all
expect 2 "checkpoint-interval" $STAGGER sim "${RUN[@]}" --checkpoint-interval 5parsecs
expect 2 "need --train-tokens" $STAGGER sim --model "$M" --cluster "$H100" --checkpoint-async
echo '{"gpu_per_h": -1}' >"$tmp/neg.json"
expect 1 "failure-rates" $STAGGER sim "${RUN[@]}" --failure-rates "$tmp/neg.json"
expect 1 "storage tape" $STAGGER sim "${SITE[@]}" --storage tape
expect 1 "reads no tokens" $STAGGER sim --model "$SRC/models/mlp.json" --cluster "$H100" \
  --gpus 2 --steps 2 --train-tokens 1B
echo "ok"
