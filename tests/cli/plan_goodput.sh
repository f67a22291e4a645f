#!/usr/bin/env bash
# stagger plan --objective time-to-train (docs/GOODPUT.md): on 8 nodes of
# one GPU with a slow filer and frequent failures, ZeRO-1 has the fastest
# step, but ZeRO-3, whose checkpoint is spread over all 8 nodes (ZeRO-1
# writes twice the bytes per writer on 4, DDP all of them from one), loses
# less to checkpoints and restarts and finishes the run first; the plan says
# so. The run objectives are refused without a run to rank.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$SRC/tests/cli/lib/common.sh"

python3 - "$SRC/models/clusters/dgx-h100.json" "$tmp/site.json" <<'P'
import json, sys
c = json.load(open(sys.argv[1]))
c["storage"] = [{"name": "filer", "write": "10MB/s", "read": "10MB/s", "source": "a slow filer"}]
json.dump(c, open(sys.argv[2], "w"))
P
echo '{"gpu_per_h": 0.25, "source": "one failure per GPU per 4 h"}' >"$tmp/rates.json"
PLAN=(plan --model "$SRC/models/gpt2-124m.json" --cluster "$tmp/site.json" --strategy dp,zero
      --zero-stage 1,3 --gpus-per-node 1 --nodes 8 --micro-batch 8 --precision mixed -q)
RUN=(--train-tokens 2B --failure-rates "$tmp/rates.json" --run-trials 200
     --restart-time detect=0s,relaunch=30s,init=0s)

first() { awk '$1 == "1" {print $2, $NF; exit}' "$1"; }
$STAGGER "${PLAN[@]}" --objective time >"$tmp/time.txt" 2>/dev/null
[ "$(first "$tmp/time.txt")" = "zero zero-stage=1" ] ||
  fail "per step ZeRO-1 should rank first: $(first "$tmp/time.txt")"
$STAGGER "${PLAN[@]}" --objective time-to-train "${RUN[@]}" --out "$tmp/p" >"$tmp/ttt.txt" 2>/dev/null
[ "$(first "$tmp/ttt.txt")" = "zero zero-stage=3" ] ||
  fail "to train, ZeRO-3 should rank first: $(first "$tmp/ttt.txt")"
grep -q "step is slower than the runner-up's, but its whole training run finishes first" \
  "$tmp/ttt.txt" || fail "the plan does not say why the slower step wins"
grep -q "goodput of the run" "$tmp/ttt.txt" || fail "the comparison lacks the goodput"
python3 - "$tmp/p/plan.json" <<'P' || fail "plan.json lacks the runs' goodput"
import json, sys
points = [p for p in json.load(open(sys.argv[1]))["points"] if p.get("rank") == 1]
assert 0 < points[0]["run_goodput"] < 1 and points[0]["run_wall_s"] > 0, points[0]
P
# The run's knobs: every point's run tries each checkpoint interval and
# spare count and keeps the best; the cheapest run holds spares here (a
# failure without one idles 8 GPUs for the 1 h repair).
$STAGGER "${PLAN[@]}" --objective cost "${RUN[@]}" --price-gpu-hour 2 --out "$tmp/k" \
  --checkpoint-interval optimal,10min,1h --spare-nodes 0,1,4 --restart-time repair=1h \
  >"$tmp/k.txt" 2>/dev/null
grep -q "spare nodes" "$tmp/k.txt" || fail "the comparison lacks the spare nodes taken"
python3 - "$tmp/k/plan.json" <<'P' || fail "plan.json lacks the knobs each run took"
import json, sys
for p in json.load(open(sys.argv[1]))["points"]:
    if p.get("rank"):
        assert p["run_spare_nodes"] in (0, 1, 4) and p["run_checkpoint_interval_s"] > 0, p
        assert p["run_spare_nodes"] > 0, p
P
expect 2 "stagger plan tries a list" $STAGGER sim --model "$SRC/models/gpt2-124m.json" \
  --cluster "$tmp/site.json" --train-tokens 1B --spare-nodes 0,1

# Configurations that build the same schedule (twins: here the strategies
# that run one GPU's MLP alike) run the same training run: each twin ranks
# by its original's time to train, never by an empty run worth 0 s (which
# put every twin first).
$STAGGER plan --model "$SRC/models/mlp.json" --cluster "$SRC/models/clusters/dgx-h100.json" \
  --nodes 1 --objective time-to-train --train-samples 1e9 -q --out "$tmp/twins" >/dev/null 2>&1 ||
  fail "the twins' plan failed"
python3 - "$tmp/twins/plan.json" <<'P' || fail "twins do not rank by their originals' runs"
import json, sys
points = json.load(open(sys.argv[1]))["points"]
by_index = {p["index"]: p for p in points}
ok = [p for p in points if p["status"] == "ok"]
twins = [p for p in ok if p.get("same_schedule_as") is not None]
assert twins, "no twins in the space"
assert all(p["objective"] > 0 and p["run_wall_s"] > 0 for p in ok), "a run worth 0 s"
for p in twins:
    assert p["objective"] == by_index[p["same_schedule_as"]]["objective"], p["index"]
P

# Energy ranks too; cost needs a price.
$STAGGER "${PLAN[@]}" --objective energy "${RUN[@]}" >/dev/null 2>&1 || fail "--objective energy failed"
$STAGGER "${PLAN[@]}" --objective cost "${RUN[@]}" --price-gpu-hour 2 >/dev/null 2>&1 ||
  fail "--objective cost failed"

expect 2 "give --train-tokens" $STAGGER "${PLAN[@]}" --objective time-to-train
expect 2 "price-gpu-hour" $STAGGER "${PLAN[@]}" --objective cost "${RUN[@]}"
expect 2 "not time" $STAGGER "${PLAN[@]}" --objective time "${RUN[@]}"
echo "ok"
