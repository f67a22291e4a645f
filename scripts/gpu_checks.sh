#!/usr/bin/env bash
# gpu_checks.sh: the checks that need a GPU, for a session that is lent one.
# Nothing here runs in CI; each step writes what it measured under traces/.
#
# On the development machine (no GPU needed), build with CUDA and bundle the
# shared libraries the device machine lacks:
#   scripts/gpu_checks.sh bundle          # build/ with CUDA + build/lib/{glib,cjson}
# Then on the device machine, in the repo root, with build/ carried:
#   scripts/gpu_checks.sh tests           # ctest -L gpu, CP against DP, bench_exec --backend cuda
#   scripts/gpu_checks.sh profile NAME    # traces/profiles/NAME/{gpt2-124m,resnet50,links}.json
#   scripts/gpu_checks.sh validate NAME   # scripts/validate_suite.sh --backend cuda --name NAME
# Each step fits one device call (10 minutes); NAME is the device's folder
# (h100, h200). Outputs also go to $OUT when it is set (the device tool
# brings that folder back).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
cd "$SRC"
step=${1:-}
name=${2:-h100}
out=${OUT:-}
export LD_LIBRARY_PATH="$SRC/build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

keep() {  # keep FILE...: copy into $OUT when set
  [[ -n $out ]] && cp "$@" "$out/" || true
}

# Context parallelism through the binary on the GPU (docs/LLM.md, "Context
# parallelism"): tiny-llama 3 steps with the ring's CP 2 and Ulysses' CP 2,
# the two ranks sharing the one GPU, against DP on one rank with the same
# global batch: losses within 1e-4 (fp32; only the order of sums differs,
# tests/cli/exec_context_parallel.sh holds the host to 1e-5; the device's
# kernels and cuBLAS's choices for half the tokens add their own orders).
cp_against_dp() {
  local tmp=/tmp/gpu-cp
  rm -rf "$tmp" && mkdir -p "$tmp"
  local run=(build/stagger run --model tests/data/exec/tiny-llama.json
    --cluster models/clusters/dgx-h100.json --gpus 1 --steps 3 --backend cuda
    --precision fp32 --micro-batch 2 --global-batch 4)
  one() {  # one NAME ARGS...: a run into $tmp/NAME, its log shown if it fails
    local name=$1; shift
    "${run[@]}" "$@" --out "$tmp/$name" >"$tmp/$name.log" 2>&1 ||
      { cat "$tmp/$name.log" >&2; echo "gpu_checks.sh: stagger run ($name) failed" >&2; return 1; }
  }
  one dp --ranks 1 --strategy dp
  one ring --ranks 2 --strategy megatron --context-parallel 2
  one a2a --ranks 2 --strategy megatron --context-parallel 2 --cp-comm all-to-all
  python3 - "$tmp" <<'PY' | tee /tmp/gpu-cp.txt
import json, sys
d = sys.argv[1]
dp = json.load(open(f"{d}/dp/report.json"))["loss"]
bad = 0
for name in ("ring", "a2a"):
    cp = json.load(open(f"{d}/{name}/report.json"))["loss"]
    diff = max(abs(x - y) for x, y in zip(cp, dp))
    ok = len(cp) == len(dp) == 3 and diff <= 1e-4
    print(f"cuda CP 2 ({name}) losses {cp} against dp {dp}: within {diff:.3g}: {'ok' if ok else 'FAILED'}")
    bad += not ok
sys.exit(bad)
PY
}

case $step in
  bundle)
    cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTAGGER_WERROR=ON >/dev/null
    cmake --build build -j"$(nproc)" >/dev/null
    mkdir -p build/lib
    for lib in $(ldd build/stagger | awk '/glib|cjson|pcre/ {print $3}'); do
      cp -L "$lib" build/lib/
    done
    grep -q "^CMAKE_CUDA_COMPILER:[A-Z]*=/" build/CMakeCache.txt ||
      echo "gpu_checks.sh: warning: CMake found no nvcc: the cuda backend is a stub" >&2
    echo "bundled: $(ls build/lib | tr '\n' ' ')" >&2
    ;;
  tests)
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    (cd build && ctest -L gpu --output-on-failure) | tee /tmp/gpu-tests.txt
    cp_against_dp
    build/tests/bench_exec --backend cuda | tee /tmp/bench-exec.txt
    keep /tmp/gpu-tests.txt /tmp/gpu-cp.txt /tmp/bench-exec.txt
    ;;
  profile)
    dir=traces/profiles/$name
    mkdir -p "$dir"
    build/stagger profile --model models/gpt2-124m.json --batches 1,2,4,8 --sharing \
      --backend cuda --out "$dir/gpt2-124m.json"
    build/stagger profile --model models/resnet50.json --batches 4,8,16,32 --sharing \
      --backend cuda --out "$dir/resnet50.json"
    build/stagger profile --links --backend cuda --out "$dir/links.json"
    keep "$dir"/*.json
    ;;
  validate)
    scripts/validate_suite.sh --backend cuda --name "$name"
    keep docs/VALIDATION.md traces/validation/"$name"/*/validate.csv
    ;;
  *)
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
