#!/usr/bin/env bash
# exec_context_parallel.sh: `stagger run --context-parallel` on the host
# backend end to end (exec/op_cp.c, docs/LLM.md "Context parallelism"):
# tiny-llama (sequences of 16) trained 3 steps with megatron's ring CP 2,
# CP 4, CP 2 x DP 2, TP 2 + SP x CP 2 and Ulysses' all-to-all CP 2 gives
# DP's losses on the same global batch within
# 1e-5 (fp32; only the order of sums differs: tests/test_exec_cp.c), and
# the ring shifts it ran (ops.csv) carried the ring's bytes in closed form: per rank, layer and micro-batch of b sequences 3 (c - 1) b K,
# K = 2 kv heads x 8 x 16 / c tokens x 4 bytes.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$SRC/tests/cli/lib/common.sh"
M=$SRC/tests/data/exec/tiny-llama.json

run() { # OUT RANKS GLOBAL-BATCH STRATEGY-ARGS...
  local out=$1 ranks=$2 gb=$3; shift 3
  $STAGGER run --model $M --ranks $ranks --steps 3 --backend host --precision fp32 \
    --micro-batch 2 --global-batch $gb --out "$tmp/$out" "$@" >"$tmp/$out.log" 2>&1 ||
    { cat "$tmp/$out.log"; fail "stagger run $*"; }
}
same_losses() { # A B
  python3 - "$tmp/$1/report.json" "$tmp/$2/report.json" <<'PY' || fail "losses of $1 and $2 differ"
import json, sys
a, b = (json.load(open(p))["loss"] for p in sys.argv[1:3])
assert len(a) == len(b) == 3, (a, b)
d = max(abs(x - y) for x, y in zip(a, b))
print(f"losses {a} against {b}: within {d:.3g}")
sys.exit(d > 1e-5)
PY
}

run dp1 1 4 --strategy dp
run dp2 2 8 --strategy dp
run cp2 2 4 --strategy megatron --context-parallel 2
run cp4 4 4 --strategy megatron --context-parallel 4
run cp2dp2 4 8 --strategy megatron --context-parallel 2
run a2a 2 4 --strategy megatron --context-parallel 2 --cp-comm all-to-all
run tpcp 4 4 --strategy megatron --tensor-parallel 2 --sequence-parallel --vocab-multiple 1 \
  --context-parallel 2
grep -q "CP 2 (ring)" "$tmp/cp2.log" || fail "no CP in the table"
same_losses cp2 dp1
same_losses cp4 dp1
same_losses cp2dp2 dp2
same_losses tpcp dp1
same_losses a2a dp1
grep -q "CP 2 (all-to-all)" "$tmp/a2a.log" || fail "no all-to-all CP in the table"

# The ring's bytes a rank sent per step, from the run's record of the ops
# it ran (ops.csv: the ring shifts on the 'cp' stream): 2 layers x 2
# micro-batches x 3 (c - 1) b K, b = 2.
python3 - "$tmp/cp2/ops.csv" "$tmp/cp4/ops.csv" <<'PY' || fail "ring bytes"
import csv, sys
for path, c in zip(sys.argv[1:3], (2, 4)):
    rows = [r for r in csv.DictReader(open(path)) if r["what"] == "ring_shift"]
    assert rows, f"{path}: no ring_shift rows"
    K = 2 * 2 * 8 * (16 // c) * 4
    want = 2 * 2 * 3 * (c - 1) * 2 * K
    got = {}
    for r in rows:
        if int(r["step"]) == 0:
            got[r["rank"]] = got.get(r["rank"], 0) + int(float(r["bytes"]))
    assert len(got) == c and all(v == want for v in got.values()), (path, got, want)
    print(f"c = {c}: every rank sent {want} bytes over the ring in step 1")
PY
echo ok
