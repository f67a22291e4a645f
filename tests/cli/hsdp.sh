#!/usr/bin/env bash
# --shard-group through the binary (HSDP, docs/LLM.md "Hybrid sharding"):
# ZeRO-3 over 2 DGX H100 nodes sharded within each node and replicated
# across them: its in-node and cross-node communicators show in groups.csv,
# the report notes the groups, it moves fewer bytes between nodes than
# ZeRO-3 over all 16 GPUs, and what cannot run is refused.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
M=$SRC/models/gpt3-1.3b.json
H100=$SRC/models/clusters/dgx-h100.json
source "$SRC/tests/cli/lib/common.sh"

field() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }

grep -q -- "--shard-group" <<<"$($STAGGER sim --help)" || fail "sim --help lacks --shard-group"

RUN=(--strategy zero --zero-stage 3 --model "$M" --cluster "$H100" --nodes 2 --precision mixed
     --micro-batch 1 --steps 3)
$STAGGER sim "${RUN[@]}" --shard-group 8 --out "$tmp/hsdp" >/dev/null 2>&1
$STAGGER sim "${RUN[@]}" --out "$tmp/flat" >/dev/null 2>&1
head -1 "$tmp/hsdp/groups.csv" | grep -q "gather" || fail "groups.csv lacks the gather group"
head -1 "$tmp/hsdp/groups.csv" | grep -q "replicate" || fail "groups.csv lacks the replicas"
[ "$(field "$tmp/hsdp/report.json" "int(r['notes']['shard_group'])")" -eq 8 ] ||
  fail "report lacks shard_group 8"
[ "$(field "$tmp/hsdp/report.json" "int(r['notes']['shard_groups'])")" -eq 2 ] ||
  fail "report lacks 2 shard groups"
inter() { field "$1" "r['comm']['bytes_by_link']['inter_node']"; }
python3 -c "import sys; sys.exit(0 if $(inter "$tmp/hsdp/report.json") < $(inter "$tmp/flat/report.json") else 1)" ||
  fail "HSDP sends no less between nodes than flat ZeRO-3"

expect 1 "must divide the ranks" $STAGGER sim "${RUN[@]}" --shard-group 3
expect 1 "those that do: zero" $STAGGER sim --strategy dp --model "$SRC/models/mlp.json" \
  --cluster "$H100" --gpus 4 --shard-group 2
expect 1 "all_reduce of grads_shard" $STAGGER run --strategy zero --zero-stage 2 \
  --model "$SRC/models/mlp.json" --cluster "$H100" --gpus 4 --shard-group 2 --steps 2 \
  --backend host
echo "ok"
