#!/usr/bin/env bash
# astra_compare.sh: one schedule simulated by stagger and by ASTRA-sim, like
# for like, side by side (docs/INTEROP.md, "ASTRA-sim side by side").
#
#   scripts/astra_compare.sh --astra BIN [--stagger BIN] [--work DIR] \
#       --model M --cluster C [any other `stagger schedule` options]
#
#   --astra    an ASTRA-sim analytical binary (docs/INTEROP.md has the recipe:
#              scripts/astra_build.sh): AstraSim_Analytical_Congestion_Unaware
#              for any cluster, ..._Congestion_Aware for one node (its network
#              takes one dimension); default: $ASTRA_SIM
#   --stagger  the stagger binary (default: build/stagger of this tree)
#   --work     keep the trace, configurations and outputs here (default: a
#              temporary folder, removed at the end)
#
# Like for like: both tools get the same question, and the script prints
# what it mapped and why before the table:
#  - the network: one dimension per link level (the GPUs of a node, then the
#    nodes), bandwidth per GPU in ASTRA-sim's GB/s, which is 2^30 B/s (its
#    bw_GBps_to_Bpns), latency in ns; a switch is FullyConnected (one hop:
#    ASTRA-sim's Switch is two, each charging the latency, where stagger
#    charges one per step);
#  - the collectives: ring in every dimension, one chunk per collective
#    (preferred-dataset-splits 1), one chunk at a time per dimension, FIFO,
#    no endpoint delay, no local reduction time (local-mem-bw out of reach):
#    ASTRA-sim's multi-dimensional ring over all ranks is reduce-scatter in
#    the node, all-reduce across nodes, all-gather in the node, which is
#    stagger's --comm-algo hierarchical; a group of fewer ranks is one flat
#    ring in ASTRA-sim whatever it is configured with, stagger's ring;
#  - stagger without NCCL's efficiency or its compute interference (the GPU
#    file's nccl_bus and nccl left out of a copy of the cluster) and without
#    calibration: ASTRA-sim has neither.
# Printed: step time (the last rank's end), exposed communication by
# ASTRA-sim's definition (step minus the time rank 0 computed) and stagger's
# own, wall time and peak memory of each run (stagger direct and through its
# Chakra import, ASTRA-sim).
#
# Exit codes: 0 compared, 1 a run failed, 2 bad usage, no ASTRA-sim, or a
# case the two cannot be made to ask alike.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
STAGGER=$SRC/build/stagger
ASTRA=${ASTRA_SIM:-}
WORK=
args=()
cluster=
size_args=()

die() { echo "astra_compare.sh: $*" >&2; exit "${2:-2}"; }

while [ $# -gt 0 ]; do
  case "$1" in
    --astra) ASTRA=${2:?--astra needs a path}; shift 2 ;;
    --astra=*) ASTRA=${1#*=}; shift ;;
    --stagger) STAGGER=${2:?--stagger needs a path}; shift 2 ;;
    --work) WORK=${2:?--work needs a folder}; shift 2 ;;
    --out|--out=*|--format|--format=*) die "$1: the script chooses where the trace goes" ;;
    --comm-algo|--comm-algo=*|--calibration|--calibration=*)
      die "${1%%=*}: the script chooses it so that stagger asks what ASTRA-sim answers" ;;
    --cluster) cluster=${2:?--cluster needs a file}; shift 2 ;;
    --cluster=*) cluster=${1#*=}; shift ;;
    --nodes|--gpus|--gpus-per-node|--ranks)
      size_args+=("$1" "${2:?$1 needs a value}"); shift 2 ;;
    --nodes=*|--gpus=*|--gpus-per-node=*|--ranks=*) size_args+=("$1"); shift ;;
    -h|--help) sed -n '2,39p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) args+=("$1"); shift ;;
  esac
done

if [ -z "$ASTRA" ]; then
  die "no ASTRA-sim binary: give --astra BIN or set ASTRA_SIM (build it with
  scripts/astra_build.sh, docs/INTEROP.md; the binary is
  build/astra_analytical/build/bin/AstraSim_Analytical_Congestion_Unaware)"
fi
[ -x "$ASTRA" ] || die "ASTRA-sim binary '$ASTRA' is not an executable file"
[ -x "$STAGGER" ] || die "stagger binary '$STAGGER' is not there (build it, or give --stagger BIN)"
[ -n "$cluster" ] || die "--cluster FILE is required (and --model M: the schedule's options)"
command -v python3 >/dev/null || die "python3 is needed to write ASTRA-sim's configuration"

if [ -z "$WORK" ]; then
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
fi
mkdir -p "$WORK"

# Wall time (s) and peak memory (KiB) of a command, into $WORK/NAME.time:
# GNU time's, whose child's peak is the command's own (a child forked or
# spawned by Python counts Python's pages); else the wall time alone.
timed() {
  local name=$1; shift
  if [ -x /usr/bin/time ] && /usr/bin/time -f "%e %M" -o /dev/null true 2>/dev/null; then
    /usr/bin/time -f "%e %M" -o "$WORK/$name.time" "$@"
  else
    local t0 code=0
    t0=$(date +%s.%N)
    "$@" || code=$?
    awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f -\n", b - a }' >"$WORK/$name.time"
    return $code
  fi
}

# 1. The schedule as the user asked, for its cluster and communicators.
"$STAGGER" schedule "${args[@]}" --cluster "$cluster" "${size_args[@]}" --calibration none \
  --out "$WORK/asked.json" >/dev/null || die "stagger schedule failed (see above)" 1

# 2. The mapping: the cluster stagger simulates, ASTRA-sim's configuration,
# the collective algorithm; printed, and refused where it cannot be alike.
python3 - "$WORK" "$ASTRA" <<'EOF'
import copy, json, os, re, sys
work, astra = sys.argv[1], sys.argv[2]
s = json.load(open(f"{work}/asked.json"))
c = s["cluster"]
def refuse(why):
    print(f"astra_compare.sh: {why}", file=sys.stderr)
    sys.exit(2)
UNITS = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
         "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
def number(text, unit):
    m = re.fullmatch(r"([0-9.eE+-]+)\s*([KMGTP]i?)?" + unit, text)
    if not m:
        refuse(f"cannot read '{text}' as {unit}")
    return float(m.group(1)) * UNITS[m.group(2) or ""]
def seconds(text):
    m = re.fullmatch(r"([0-9.eE+-]+)\s*(s|ms|us|ns)", text)
    return float(m.group(1)) * {"s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}[m.group(2)]

gpus = c.get("gpus", c["nodes"] * c["gpus_per_node"])
ranks = len(s["ranks"])
devices = [r["device"] for r in s["ranks"]]
if len(set(devices)) != ranks:
    refuse(f"{ranks} ranks share {len(set(devices))} GPUs: ASTRA-sim has one NPU per rank, "
           "so ranks sharing a GPU have no like there")
per_node = min(c["gpus_per_node"], gpus)
if gpus % per_node != 0 or sorted(devices) != list(range(gpus)):
    refuse(f"{ranks} ranks on {gpus} GPUs of {per_node} per node: ASTRA-sim's network is "
           "whole nodes of one size, every GPU a rank")
dims = [("intra_node", per_node)]
if gpus > per_node:
    dims.append(("inter_node", gpus // per_node))
if any(r.get("start_ns", 0) for r in s["ranks"]):
    refuse("ranks start at different times (start_ns): ASTRA-sim starts every rank at 0")
aware = "Congestion_Aware" in os.path.basename(astra)
if aware and len(dims) > 1:
    refuse(f"{os.path.basename(astra)} takes a network of one dimension (its congestion-aware "
           f"backend, construct_topology), this cluster has {len(dims)} (GPUs, nodes): use "
           "AstraSim_Analytical_Congestion_Unaware")

# Collectives: over all ranks ASTRA-sim runs its multi-dimensional collective,
# over fewer one flat ring (CommunicatorGroup::get_collective_plan).
node_of = lambda d: d // c["gpus_per_node"]
used = set()
for p in s["programs"]:
    for op in p["ops"]:
        if op.get("kind") == "COMM_COLL":
            used.add(op["comm"])
            if op.get("bytes", 0) == 0:
                refuse(f"program '{p['name']}' has a collective of 0 bytes ({op.get('collective')}): "
                       "ASTRA-sim never completes one (a 0-byte all-gather left 'unreleased "
                       "nodes' at exit)")
world_multi, across, within = False, set(), set()
for i in sorted(used):
    comm = s["comms"][i]
    for g in comm["groups"]:
        if len(g) == 1:
            refuse(f"communicator '{comm['name']}' has collectives over a group of one rank "
                   f"(rank {g[0]}): ASTRA-sim never completes a collective over one NPU (it "
                   "exits with 'Hardware Resource ... has unreleased nodes'); give the layout "
                   "more ranks in that dimension")
        nodes = {node_of(devices[r]) for r in g}
        if len(nodes) == 1:
            within.add(comm["name"])
        elif len(g) == ranks:
            world_multi = True
        else:
            across.add(comm["name"])
notes = []
algo = "hierarchical" if world_multi and not across and not within else "ring"
if world_multi:
    notes.append(f"collectives over all {ranks} ranks: ASTRA-sim's ring in each dimension with "
                 "localBWAware (reduce-scatter in the node, all-reduce across nodes, all-gather "
                 "in the node; all-gather nodes first), which is stagger's --comm-algo "
                 "hierarchical")
    if algo != "hierarchical":
        notes.append("NOT ALIKE: stagger takes one algorithm for every collective, and other "
                     "groups need the ring: the collectives over all ranks differ (ring in stagger)")
if across:
    notes.append(f"collectives over groups of fewer ranks across nodes ({', '.join(sorted(across))}): "
                 "one flat ring over the members in ASTRA-sim whatever it is configured with "
                 "(CommunicatorGroup::get_collective_plan), stagger's --comm-algo ring")
if within:
    notes.append(f"collectives within one node ({', '.join(sorted(within))}): ring in both")
if not used:
    notes.append("no collectives: point-to-point only (both: latency + bytes / bandwidth)")

# stagger's cluster: NCCL's efficiency (nccl_bus) and its compute interference
# (nccl: channels, memory traffic) out, which ASTRA-sim does not model.
like = copy.deepcopy(c)
perf = like["gpu"].get("performance")
if isinstance(perf, dict):
    dropped = [k for k in ("nccl_bus", "nccl") if perf.pop(k, None) is not None]
else:
    dropped = []
json.dump(like, open(f"{work}/cluster.json", "w"), indent=1)

TOPO = {"switch": "FullyConnected", "ring": "Ring"}
links = c["links"]
bw = [number(links[d]["bandwidth"], "B/s") for d, _ in dims]
lat = [seconds(links[d]["latency"]) * 1e9 for d, _ in dims]
with open(f"{work}/network.yml", "w") as f:
    f.write("topology: [ %s ]\n" % ", ".join(TOPO[links[d]["topology"]] for d, _ in dims))
    f.write("npus_count: [ %s ]\n" % ", ".join(str(n) for _, n in dims))
    f.write("bandwidth: [ %s ]  # GB/s of 2^30 B per GPU, one direction\n" %
            ", ".join("%.6f" % (b / 2**30) for b in bw))
    f.write("latency: [ %s ]  # ns\n" % ", ".join("%.1f" % l for l in lat))
gpu = c["gpu"]
system = {
    "scheduling-policy": "FIFO",
    "intra-dimension-scheduling": "FIFO",
    "inter-dimension-scheduling": "ascending",
    "endpoint-delay": 1,
    "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 1,
    "all-reduce-implementation": ["ring"] * len(dims),
    "all-gather-implementation": ["ring"] * len(dims),
    "reduce-scatter-implementation": ["ring"] * len(dims),
    "all-to-all-implementation": ["ring"] * len(dims),
    "collective-optimization": "localBWAware",
    "local-mem-bw": 1e9,
    "boost-mode": 0,
    "roofline-enabled": 0,
    "peak-perf": max(number(v, "FLOP/s") for v in gpu["flops"].values()) / 1e12,
}
json.dump(system, open(f"{work}/system.json", "w"), indent=2)
json.dump({"memory-type": "NO_MEMORY_EXPANSION"}, open(f"{work}/remote_memory.json", "w"))
open(f"{work}/algo", "w").write(algo + "\n")

out = []
out.append(f"like for like ({ranks} ranks, {len(dims)} dimension{'s' if len(dims) > 1 else ''}):")
for (d, n), b, l in zip(dims, bw, lat):
    t = links[d]["topology"]
    out.append(f"  {d}: {n} NPUs, {TOPO[t]} ({t}), {b / 1e9:g} GB/s of 1e9 B = "
               f"{b / 2**30:.6f} ASTRA-sim GB/s of 2^30 B, {l:g} ns")
if any(links[d]["topology"] == "switch" for d, _ in dims):
    out.append("  switch -> FullyConnected: ASTRA-sim's Switch is two hops (GPU, switch, GPU), "
               "each charging the latency (and, congestion-aware, the bytes again: store and "
               "forward); stagger charges one latency a step; FullyConnected is one hop at the "
               "same bandwidth per GPU")
for n in notes:
    out.append("  " + n)
out.append("  ASTRA-sim: one chunk per collective (preferred-dataset-splits 1), one at a time "
           "per dimension (active-chunks-per-dimension 1), FIFO: stagger runs a collective whole, "
           "in issue order on its communication stream")
out.append("  ASTRA-sim: endpoint-delay 1 ns (0 trips its event queue's assertion that an event "
           "comes after now), local-mem-bw 1e9 GB/s (no time for the local reduction: NCCL "
           "reduces inside the transfer, stagger's latency per step holds the rest)")
if dropped:
    out.append(f"  stagger: {work}/cluster.json, the cluster without the GPU file's "
               f"{' and '.join(dropped)} (NCCL's share of the link rate and the compute it "
               "slows), --calibration none, --comm-algo " + algo)
else:
    out.append(f"  stagger: --calibration none, --comm-algo {algo}")
open(f"{work}/mapping.txt", "w").write("\n".join(out) + "\n")
EOF
algo=$(cat "$WORK/algo")
like=(--cluster "$WORK/cluster.json" "${size_args[@]}" --calibration none --comm-algo "$algo")

# 3. The schedule as a Chakra trace; stagger simulates it directly and through
# the trace, one step as ASTRA-sim runs it.
"$STAGGER" schedule "${args[@]}" "${like[@]}" --format chakra --out "$WORK/et/trace" \
  >"$WORK/export.txt" || die "stagger schedule --format chakra failed (see above)" 1
timed stagger_direct "$STAGGER" sim "${args[@]}" "${like[@]}" --steps 1 --out "$WORK/direct" \
  >/dev/null 2>"$WORK/direct.log" || { cat "$WORK/direct.log" >&2; die "stagger sim failed" 1; }
timed stagger_chakra "$STAGGER" sim --chakra "$WORK/et/trace" "${like[@]}" --steps 1 \
  --out "$WORK/stagger" >/dev/null 2>"$WORK/stagger.log" ||
  { cat "$WORK/stagger.log" >&2; die "stagger sim --chakra failed" 1; }

# 4. ASTRA-sim on the same files.
timed astra "$ASTRA" --workload-configuration="$WORK/et/trace" \
  --comm-group-configuration="$WORK/et/trace.comm_groups.json" \
  --system-configuration="$WORK/system.json" \
  --remote-memory-configuration="$WORK/remote_memory.json" \
  --network-configuration="$WORK/network.yml" >"$WORK/astra.log" 2>&1 ||
  { tail -20 "$WORK/astra.log" >&2; die "ASTRA-sim failed (its log: $WORK/astra.log)" 1; }

# 5. Side by side. ASTRA-sim logs, per rank, "sys[R] finished, T cycles,
# exposed communication E cycles" (a cycle is 1 ns in its analytical backend).
python3 - "$WORK" <<'EOF'
import json, re, sys
work = sys.argv[1]
log = open(f"{work}/astra.log").read()
runs = {int(r): (int(t), int(e)) for r, t, e in
        re.findall(r"sys\[(\d+)\] finished, (\d+) cycles, exposed communication (\d+) cycles", log)}
if not runs:
    sys.exit(f"astra_compare.sh: no 'sys[R] finished' line in {work}/astra.log")
def report(d):
    r = json.load(open(f"{work}/{d}/report.json"))
    step = r["step_time_s"] * 1e3
    busy = r["devices"][0]["busy_fraction"] * r["step_time_s"] * 1e3
    return r, step, busy
def usage(name):
    # GNU time's last line: "wall KiB" (it writes a line before when the command failed)
    wall, kib = open(f"{work}/{name}.time").read().split("\n")[-2].split()
    return float(wall), (int(kib) / 1024 if kib != "-" else float("nan"))
rep, step, busy = report("stagger")
drep, dstep, dbusy = report("direct")
a_step = max(t for t, _ in runs.values()) / 1e6
a_exposed = runs[min(runs)][1] / 1e6
print(open(f"{work}/export.txt").read().strip().splitlines()[0])
print(open(f"{work}/mapping.txt").read().rstrip())
w = 12
print(f"{'':44s}{'stagger':>{w}s}{'via Chakra':>{w}s}{'ASTRA-sim':>{w}s}")
print(f"{'step time (one step, ms)':44s}{dstep:{w}.3f}{step:{w}.3f}{a_step:{w}.3f}")
print(f"{'exposed comm, rank 0: step - compute (ms)':44s}{dstep - dbusy:{w}.3f}"
      f"{step - busy:{w}.3f}{a_exposed:{w}.3f}")
print(f"{'exposed comm, rank 0: comm and no kernel (ms)':44s}"
      f"{drep['comm']['exposed_s'] * 1e3:{w}.3f}{rep['comm']['exposed_s'] * 1e3:{w}.3f}{'-':>{w}s}")
u = [usage(n) for n in ("stagger_direct", "stagger_chakra", "astra")]
print(f"{'wall time (s)':44s}" + "".join(f"{x[0]:{w}.2f}" for x in u))
print(f"{'peak memory (MiB)':44s}" + "".join(f"{x[1]:{w}.1f}" for x in u))
gap = (step - a_step) / a_step * 100 if a_step > 0 else float("nan")
print(f"step: stagger {gap:+.1f} % against ASTRA-sim")
print(f"ranks: {len(runs)} in ASTRA-sim, {rep['ranks']} in stagger; files in {work}")
EOF
