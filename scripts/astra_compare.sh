#!/usr/bin/env bash
# astra_compare.sh: one schedule simulated by stagger and by ASTRA-sim, side
# by side (docs/INTEROP.md, "ASTRA-sim side by side").
#
#   scripts/astra_compare.sh --astra BIN [--stagger BIN] [--work DIR] \
#       --model M --cluster C [any other `stagger schedule` options]
#
#   --astra    an ASTRA-sim analytical binary the user has built
#              (build/astra_analytical/build.sh in github.com/astra-sim/astra-sim:
#              build/astra_analytical/build/bin/AstraSim_Analytical_Congestion_Aware,
#              or ..._Unaware); default: $ASTRA_SIM
#   --stagger  the stagger binary (default: build/stagger of this tree)
#   --work     keep the trace, configurations and outputs here (default: a
#              temporary folder, removed at the end)
#
# What it does: `stagger schedule --format chakra` writes one step of the
# schedule as Chakra traces; `stagger sim --chakra` simulates that trace on
# the cluster for one step; the cluster file becomes ASTRA-sim's network
# (one dimension per link level: the GPUs of a node, then the nodes, with the
# cluster's bandwidth per GPU and latency) and system configuration (ring
# collectives, the GPU's memory bandwidth and peak, replaying each COMP
# node's duration_micros); ASTRA-sim runs the same files. Printed: the step
# time (the last rank's end) and exposed communication, both by ASTRA-sim's
# definition (step time minus the time rank 0 computed) and, for stagger, by
# its own (time rank 0's GPU has communication in flight and no kernel).
#
# Exit codes: 0 compared, 1 a run failed, 2 bad usage or no ASTRA-sim.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
STAGGER=$SRC/build/stagger
ASTRA=${ASTRA_SIM:-}
WORK=
args=()
cluster=
sim_args=()

die() { echo "astra_compare.sh: $*" >&2; exit "${2:-2}"; }

while [ $# -gt 0 ]; do
  case "$1" in
    --astra) ASTRA=${2:?--astra needs a path}; shift 2 ;;
    --astra=*) ASTRA=${1#*=}; shift ;;
    --stagger) STAGGER=${2:?--stagger needs a path}; shift 2 ;;
    --work) WORK=${2:?--work needs a folder}; shift 2 ;;
    --out|--out=*|--format|--format=*) die "$1: the script chooses where the trace goes" ;;
    --cluster|--nodes|--gpus|--profile|--comm-algo)
      [ "$1" = --cluster ] && cluster=$2
      sim_args+=("$1" "${2:?$1 needs a value}"); args+=("$1" "$2"); shift 2 ;;
    --cluster=*|--nodes=*|--gpus=*|--profile=*|--comm-algo=*)
      case "$1" in --cluster=*) cluster=${1#*=} ;; esac
      sim_args+=("$1"); args+=("$1"); shift ;;
    -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) args+=("$1"); shift ;;
  esac
done

if [ -z "$ASTRA" ]; then
  die "no ASTRA-sim binary: give --astra BIN or set ASTRA_SIM (build it with
  build/astra_analytical/build.sh in github.com/astra-sim/astra-sim; the binary is
  build/astra_analytical/build/bin/AstraSim_Analytical_Congestion_Aware)"
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

# 1. The schedule: its JSON (for the resized cluster) and its Chakra trace.
"$STAGGER" schedule "${args[@]}" --out "$WORK/schedule.json" >/dev/null ||
  die "stagger schedule failed (see above)" 1
"$STAGGER" schedule "${args[@]}" --format chakra --out "$WORK/et/trace" >"$WORK/export.txt" ||
  die "stagger schedule --format chakra failed (see above)" 1

# 2. stagger simulates the trace, one step as ASTRA-sim runs it.
"$STAGGER" sim --chakra "$WORK/et/trace" "${sim_args[@]}" --steps 1 --out "$WORK/stagger" \
  >/dev/null 2>"$WORK/stagger.log" || { cat "$WORK/stagger.log" >&2; die "stagger sim failed" 1; }

# 3. ASTRA-sim's configuration from the cluster.
python3 - "$WORK" <<'EOF'
import json, re, sys
work = sys.argv[1]
c = json.load(open(f"{work}/schedule.json"))["cluster"]
UNITS = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
         "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
def number(text, unit):
    m = re.fullmatch(r"([0-9.eE+-]+)\s*([KMGTP]i?)?" + unit, text)
    if not m:
        sys.exit(f"astra_compare.sh: cannot read '{text}' as {unit}")
    return float(m.group(1)) * UNITS[m.group(2) or ""]
def seconds(text):
    m = re.fullmatch(r"([0-9.eE+-]+)\s*(s|ms|us|ns)", text)
    return float(m.group(1)) * {"s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}[m.group(2)]
gpus = c.get("gpus", c["nodes"] * c["gpus_per_node"])
per_node = min(c["gpus_per_node"], gpus)
dims = [("intra_node", per_node)]
if gpus > per_node:
    dims.append(("inter_node", gpus // per_node))
topo = {"switch": "Switch", "ring": "Ring"}
links = c["links"]
with open(f"{work}/network.yml", "w") as f:
    f.write("topology: [ %s ]\n" % ", ".join(topo[links[d]["topology"]] for d, _ in dims))
    f.write("npus_count: [ %s ]\n" % ", ".join(str(n) for _, n in dims))
    f.write("bandwidth: [ %s ]  # GB/s per GPU, one direction\n" %
            ", ".join("%.3f" % (number(links[d]["bandwidth"], "B/s") / 1e9) for d, _ in dims))
    f.write("latency: [ %s ]  # ns\n" %
            ", ".join("%.1f" % (seconds(links[d]["latency"]) * 1e9) for d, _ in dims))
gpu = c["gpu"]
system = {
    "scheduling-policy": "LIFO", "endpoint-delay": 10,
    "active-chunks-per-dimension": 1, "preferred-dataset-splits": 4,
    "all-reduce-implementation": ["ring"] * len(dims),
    "all-gather-implementation": ["ring"] * len(dims),
    "reduce-scatter-implementation": ["ring"] * len(dims),
    "all-to-all-implementation": ["ring"] * len(dims),
    "collective-optimization": "localBWAware",
    "local-mem-bw": number(gpu["memory_bandwidth"], "B/s") / 1e9,
    "boost-mode": 0,
    "roofline-enabled": 0,
    "peak-perf": max(number(v, "FLOP/s") for v in gpu["flops"].values()) / 1e12,
}
json.dump(system, open(f"{work}/system.json", "w"), indent=2)
json.dump({"memory-type": "NO_MEMORY_EXPANSION"}, open(f"{work}/remote_memory.json", "w"))
EOF

# 4. ASTRA-sim on the same files.
"$ASTRA" --workload-configuration="$WORK/et/trace" \
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
report = json.load(open(f"{work}/stagger/report.json"))
step = report["step_time_s"] * 1e3
busy = report["devices"][0]["busy_fraction"] * report["step_time_s"] * 1e3
a_step = max(t for t, _ in runs.values()) / 1e6
a_exposed = runs[min(runs)][1] / 1e6
print(open(f"{work}/export.txt").read().strip().splitlines()[0])
print(f"{'':44s}{'stagger':>12s}{'ASTRA-sim':>12s}")
print(f"{'step time (one step, ms)':44s}{step:12.3f}{a_step:12.3f}")
print(f"{'exposed comm, rank 0: step - compute (ms)':44s}{step - busy:12.3f}{a_exposed:12.3f}")
print(f"{'exposed comm, rank 0: comm and no kernel (ms)':44s}"
      f"{report['comm']['exposed_s'] * 1e3:12.3f}{'-':>12s}")
print(f"ranks: {len(runs)} in ASTRA-sim, {report['ranks']} in stagger; files in {work}")
EOF
