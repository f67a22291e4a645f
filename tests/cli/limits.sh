#!/usr/bin/env bash
# Resource limits and progress through the binary (docs/RELIABILITY.md):
# --max-memory is a shared option with --help, a run within it runs, one
# beyond it is refused before it starts with what to change, and a long
# command says what it does on stderr (STAGGER_PROGRESS_MS=0 shows the
# line from the start, so that no test waits for one).
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
M=$SRC/models/mlp.json
C=$SRC/models/clusters/dgx-h100.json
fail() { echo "FAIL: $*" >&2; exit 1; }

for cmd in sim schedule plan; do
  # Not through a pipe into grep -q: it would stop reading, and pipefail see SIGPIPE.
  grep -q -- "--max-memory=SIZE" <<<"$($STAGGER $cmd --help-all 2>/dev/null)" ||
    fail "$cmd --help lacks --max-memory"
done

# The progress line: one per phase outside a terminal, on stderr only.
STAGGER_PROGRESS_MS=0 $STAGGER sim --model $M --cluster $C --steps 3 --out "$tmp/p" \
  >"$tmp/out" 2>"$tmp/err"
for phase in "building the schedule" "simulating" "summarizing" "writing the outputs"; do
  grep -q "^  dp: $phase" "$tmp/err" || { cat "$tmp/err" >&2; fail "no progress line '$phase'"; }
done
grep -q "dp: simulating" "$tmp/out" && fail "progress on stdout"
# Without the variable a quick run shows none.
$STAGGER sim --model $M --cluster $C >/dev/null 2>"$tmp/err"
grep -q "dp: simulating" "$tmp/err" && fail "a quick run showed progress"

# 8 GPUs, 3 steps: 1 rank simulated (folded), 14 ops a step, 42 executions
# at 512 B each = 21504 B; 40 KiB fits, 20 KiB does not.
$STAGGER sim --model $M --cluster $C --steps 3 --max-memory 40KiB >/dev/null 2>&1 ||
  fail "a run within --max-memory was refused"
set +e
$STAGGER sim --model $M --cluster $C --steps 3 --max-memory 20KiB >/dev/null 2>"$tmp/err"
code=$?
set -e
[ $code -eq 1 ] || fail "exit $code beyond --max-memory"
grep -q "42 op executions" "$tmp/err" || { cat "$tmp/err" >&2; fail "no count of executions"; }
grep -q "fewer --steps (3 now)" "$tmp/err" || fail "no advice on steps"
echo "limits: ok"
