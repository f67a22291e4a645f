#!/usr/bin/env bash
# The planner over megatron's space through the binary (issue 13 part 6):
# TP x PP x V x ZeRO x recompute x micro-batch on a small Llama over 1-4
# nodes; the constraints' refusals, the closed-form estimates in plan.json,
# and the winner against a runner-up with another schedule, with the exposed
# time per communicator and memory by category.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
C=$SRC/models/clusters/dgx-h100.json
fail() { echo "FAIL: $*" >&2; exit 1; }
cat >"$tmp/m.json" <<'JSON'
{"name": "small-llama", "input": [512], "dtype": "bf16", "layers": [
 {"name": "embed", "type": "embedding", "vocab": 32000, "dim": 1024},
 {"repeat": 8, "layers": [{"name": "layers.{i}", "type": "llama_block", "heads": 16,
   "kv_heads": 4, "ffn": 2816}]},
 {"name": "norm", "type": "rmsnorm"},
 {"name": "lm_head", "type": "lm_head", "vocab": 32000},
 {"name": "loss", "type": "softmax_cross_entropy"}]}
JSON
grep -q -- "--tp-across-nodes" <<<"$($STAGGER plan --help-all)" || fail "no --tp-across-nodes help"

$STAGGER plan --model "$tmp/m.json" --cluster $C --nodes 1-4 --global-batch 64 --mem-cap 80GiB \
  --precision mixed --strategy megatron --tensor-parallel 1,2,4,8,16 --micro-batch 1,2 \
  --threads 2 --out "$tmp/p" >"$tmp/table" 2>/dev/null
grep -q "^Winner: megatron" "$tmp/table" || fail "no winner"
grep -q "^Runner-up: megatron" "$tmp/table" || fail "no runner-up"
grep -q 'on "data' "$tmp/table" || fail "no exposed time per group"
grep -q "pipeline fill + drain" "$tmp/table" || fail "no closed-form split"
grep -q "activations" "$tmp/table" || fail "no memory by category"
python3 - "$tmp/p/plan.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
pts = p["points"]
w, r = pts[p["winner"]], pts[p["runner_up"]]
assert (r["same_schedule_as"] if r["same_schedule_as"] is not None else r["index"]) != w["index"], "runner-up is the winner's twin"
span = [q for q in pts if q["settings"].get("tensor-parallel") == "16"]
assert span and all(q["status"] == "infeasible" for q in span), "TP 16 across nodes was tried"
assert any("span nodes" in q["reason"] for q in span), "no reason naming the nodes"
sim = [q for q in pts if q["simulated"] and q["estimate"]]
assert sim, "nothing simulated with an estimate"
for q in sim:
    assert q["estimate"]["peak_bytes"] <= q["peak_bytes"], q
    assert q["estimate"]["step_time_s"] <= q["step_time_s"], q
unbuilt = [q for q in pts if q["bound"] is None and q["status"] in ("pruned", "out_of_memory")]
assert unbuilt and all("not built" in q["reason"] for q in unbuilt), "nothing decided before building"
assert "pruned" in p["decided_unsimulated"], "no rules"
PY
