#!/usr/bin/env bash
# `stagger model` end to end: the table, the JSON, the type list, exit codes.
# Env: STAGGER (the binary), SRC (the source tree).
set -euo pipefail

: "${STAGGER:?set STAGGER to the stagger binary}"
: "${SRC:?set SRC to the source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# The table: published parameter count, a known row, the totals.
"$STAGGER" model show "$SRC/models/resnet50.json" >"$tmp/table.txt"
grep -q '25,557,032' "$tmp/table.txt" || fail "resnet50 total parameters"
grep -Eq '^ *0 +conv1 +conv2d +\[3,224,224\] -> \[64,112,112\] +9,408 ' "$tmp/table.txt" ||
  fail "resnet50 conv1 row"
grep -q 'GFLOP' "$tmp/table.txt" || fail "FLOP totals"

# A shipped model by name.
grep -q '124,439,808' <<<"$(STAGGER_DATA_DIR="$SRC" "$STAGGER" model show gpt2-124m)" ||
  fail "gpt2-124m by name"

# JSON: expanded layers with explicit attrs and derived numbers.
"$STAGGER" model show --json "$SRC/models/vit_b16.json" >"$tmp/vit.json"
grep -q '"signature":' "$tmp/vit.json" || fail "--json has signatures"
grep -Eq '"params":[[:space:]]+86567656' "$tmp/vit.json" || fail "--json totals"
grep -q '"name":[[:space:]]*"encoder.layer11"' "$tmp/vit.json" || fail "--json expands repeats"

# Types and their attributes.
"$STAGGER" model types >"$tmp/types.txt"
for t in conv2d linear transformer_block bottleneck custom; do
  grep -q "^$t\$" "$tmp/types.txt" || fail "types lists $t"
done
grep -Eq '^ +out_channels +required' "$tmp/types.txt" || fail "types shows attributes"

grep -q 'show' <<<"$("$STAGGER" model --help)" || fail "--help"

# Exit codes: 2 for usage, 1 for a model that does not load.
set +e
"$STAGGER" model >/dev/null 2>&1; rc=$?
[ "$rc" -eq 2 ] || fail "no command: exit $rc, expected 2"
"$STAGGER" model frobnicate >/dev/null 2>&1; rc=$?
[ "$rc" -eq 2 ] || fail "unknown command: exit $rc, expected 2"
"$STAGGER" model show >/dev/null 2>&1; rc=$?
[ "$rc" -eq 2 ] || fail "show without MODEL: exit $rc, expected 2"
"$STAGGER" model show "$SRC/tests/data/models/bad_wrong_type.json" 2>"$tmp/err.txt" >/dev/null; rc=$?
set -e
[ "$rc" -eq 1 ] || fail "bad model: exit $rc, expected 1"
grep -q "bad_wrong_type.json: layer 0 'conv1': key 'kernel'" "$tmp/err.txt" ||
  fail "bad model message: $(cat "$tmp/err.txt")"

echo "cli model: ok"
