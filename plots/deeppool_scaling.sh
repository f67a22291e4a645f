#!/usr/bin/env bash
# deeppool_scaling.sh: DeepPool's strong-scaling comparison, in simulation
# (docs/DEEPPOOL.md): the global batch is held fixed while GPUs are added,
# and each GPU count runs data parallelism, burst parallelism, and
# multiplexing (a background job beside a burst or a data-parallel
# foreground), on the per-layer A100 profiles the DeepPool authors published.
#
#   plots/deeppool_scaling.sh [STAGGER [OUT [IMG]]]
#     STAGGER  the binary (default: build/stagger)
#     OUT      where the runs and the tables go (default: runs/deeppool)
#     IMG      where the figures go (default: docs/img)
#   Environment: DEEPPOOL_DATA (default: traces/reference/deeppool) when the
#   profiles in traces/profiles must be imported again;
#   GPUS (default: "1 2 4 8 16 32"), STEPS (default: 12), MODELS (default:
#   "vgg16 wrn101 inception").
#
# Tables (CSV, one row per GPU count), then one figure per model:
#   OUT/vgg16.csv, OUT/wrn101.csv, OUT/inception.csv
#   IMG/deeppool-scaling-vgg16.png, IMG/deeppool-scaling-wrn101.png,
#   IMG/deeppool-scaling-inception.png
# Every number is a simulation: compute from the imported A100 profile where
# it has the layer (else the estimate compute model), links from the network
# model of models/clusters/dgx-a100.json (8 GPUs per node, more nodes past 8).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
STAGGER=${1:-$SRC/build/stagger}
OUT=${2:-$SRC/runs/deeppool}
IMG=${3:-$SRC/docs/img}
DATA=${DEEPPOOL_DATA:-$SRC/traces/reference/deeppool}
GPUS=${GPUS:-1 2 4 8 16 32}
STEPS=${STEPS:-12}
MODELS=${MODELS:-vgg16 wrn101 inception}
CLUSTER=$SRC/models/clusters/dgx-a100.json
mkdir -p "$OUT" "$IMG"
command -v jq >/dev/null || { echo "deeppool_scaling.sh needs jq" >&2; exit 1; }

# profile MODEL SHORT FILE: the imported profile, imported again if absent.
profile() {
  local p=$SRC/traces/profiles/a100-deeppool-$2.json
  if [ ! -f "$p" ]; then
    [ -f "$DATA/$3" ] || { echo "neither $p nor $DATA/$3 is here" >&2; exit 1; }
    "$STAGGER" profile import deeppool "$DATA/$3" --model "$SRC/models/$1.json" --out "$p" >&2
  fi
  echo "$p"
}

# One model: MODEL SHORT PROFILE_FILE GLOBAL_BATCH BACKGROUND
sweep() {
  local model=$1 short=$2 batch=$4 bg=$5 prof csv
  prof=$(profile "$1" "$2" "$3")
  csv=$OUT/$short.csv
  echo "gpus,dp,burst,burst_mux_fg,burst_mux_bg,burst_mux_cluster,dp_mux_fg,dp_mux_bg,dp_mux_cluster,dp_idle,burst_idle,burst_mux_idle,burst_planned_ms,burst_planned_gpu_ms,dp_planned_gpu_ms,burst_slowdown" >"$csv"
  for g in $GPUS; do
    local size=(--gpus "$g") dir=$OUT/$short/g$g
    mkdir -p "$OUT/$short"
    [ "$g" -gt 8 ] && size=(--nodes $((g / 8)))
    "$STAGGER" sim --model "$SRC/models/$model.json" --cluster "$CLUSTER" --profile "$prof" \
      --strategy dp,burst,multiplex,multiplex --foreground burst,burst,burst,dp \
      --background "$bg" --global-batch "$batch" --micro-batch $((batch / g)) "${size[@]}" \
      --steps "$STEPS" --out "$dir" >"$dir.txt" 2>"$dir.log" || { cat "$dir.log" >&2; exit 1; }
    local d=$dir/dp/report.json b=$dir/burst/report.json
    local mb=$dir/multiplex-foregroundburst/report.json md=$dir/multiplex-foregrounddp/report.json
    jq -r --argjson g "$g" -s '
      def idle: 1 - ([.devices[].busy_fraction] | add / length);
      def bg: [.multiplex.background[].samples_per_s] | add // 0;
      [$g, .[0].samples_per_s, .[1].samples_per_s,
       .[2].multiplex.foreground_samples_per_s, (.[2] | bg), .[2].multiplex.cluster_samples_per_s,
       .[3].multiplex.foreground_samples_per_s, (.[3] | bg), .[3].multiplex.cluster_samples_per_s,
       (.[0] | idle), (.[1] | idle), .[2].multiplex.gpu_idle_fraction,
       .[1].notes.planned_step_s * 1e3, .[1].notes.planned_gpu_time_s * 1e3,
       .[1].notes.planned_dp_gpu_time_s * 1e3, .[2].multiplex.foreground_slowdown]
      | map(tostring) | join(",")' "$d" "$b" "$mb" "$md" >>"$csv"
    echo "$short: $g GPUs done" >&2
  done
  gnuplot -e "datafile='$csv'; outfile='$IMG/deeppool-scaling-$short.png'; name='$model, global batch $batch, background $bg'" \
    "$SRC/plots/deeppool_scaling.gp"
  echo "$csv"
  echo "$IMG/deeppool-scaling-$short.png"
}

for m in $MODELS; do
  case $m in
    vgg16) sweep vgg16 vgg16 vggLayerGpuProfileA100.txt 32 vgg16:b16 ;;
    wrn101) sweep wide_resnet101_2 wrn101 wrnLayerGpuProfileA100V2.txt 32 wide_resnet101_2:b8 ;;
    inception) sweep inception_v3 inception inceptionLayerGpuProfileA100.txt 32 vgg16:b16 ;;
    *) echo "unknown model '$m' (vgg16, wrn101, inception)" >&2; exit 2 ;;
  esac
done
