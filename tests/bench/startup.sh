#!/usr/bin/env bash
# startup.sh: what starting stagger costs (docs/PERFORMANCE.md): the mean
# wall time of `stagger --version` and of a small `stagger sim` over N runs,
# their peak RSS, and the shared libraries each maps (none of CUDA's, cuBLAS's
# or NCCL's, now that those backends are modules loaded on demand). With a
# baseline binary (a build from before the modules), the same for it, and the
# ratios. --cold first evicts the binary's libraries from the page cache
# (posix_fadvise; best effort: pages another process maps stay).
#
#   tests/bench/startup.sh [--cold] [-n N] [STAGGER [BASELINE]]
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
cold=0 n=20
while [[ $# -gt 0 && $1 == -* ]]; do
  case $1 in
    --cold) cold=1; shift;;
    -n) n=$2; shift 2;;
    *) echo "usage: $0 [--cold] [-n N] [STAGGER [BASELINE]]" >&2; exit 2;;
  esac
done
bins=("${1:-$SRC/build/stagger}")
[[ -n "${2:-}" ]] && bins+=("$2")
sim=(sim --model "$SRC/models/mlp.json" --cluster "$SRC/models/clusters/dgx-h100.json" --steps 2)

evict() {
  [[ $cold -eq 1 ]] || return 0
  python3 - "$1" $(ldd "$1" | awk '/=> \//{print $3}') <<'PY'
import os, sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
PY
}

# mean_ms BIN ARGS...: mean wall time of N runs, in ms (3 decimals).
mean_ms() {
  local bin=$1 total=0 t0 t1; shift
  for _ in $(seq "$n"); do
    evict "$bin"
    t0=$(date +%s%N); "$bin" "$@" >/dev/null 2>&1; t1=$(date +%s%N)
    total=$((total + t1 - t0))
  done
  awk -v t=$total -v n=$n 'BEGIN { printf "%.3f", t / n / 1e6 }'
}

rss_kib() { if [[ -x /usr/bin/time ]]; then /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; else echo "?"; fi; }
gpu_libs() { LD_DEBUG=files "$@" 2>&1 >/dev/null | grep -oE 'file=[^ ]*lib(cuda|cudart|cublas|cublasLt|nccl)[^ ]*' | sed 's/file=//' | sort -u | tr '\n' ' '; }

printf '%-40s %12s %10s %12s %10s  %s\n' "binary (N=$n$([[ $cold -eq 1 ]] && echo ', cold'))" \
  "version ms" "RSS KiB" "sim ms" "RSS KiB" "GPU libraries mapped by --version"
declare -a v s
for i in "${!bins[@]}"; do
  b=${bins[$i]}
  v[$i]=$(mean_ms "$b" --version)
  s[$i]=$(mean_ms "$b" "${sim[@]}")
  printf '%-40s %12s %10s %12s %10s  %s\n' "$b" "${v[$i]}" "$(rss_kib "$b" --version)" "${s[$i]}" \
    "$(rss_kib "$b" "${sim[@]}")" "$(gpu_libs "$b" --version)"
done
if [[ ${#bins[@]} -eq 2 ]]; then
  awk -v a=${v[1]} -v b=${v[0]} -v c=${s[1]} -v d=${s[0]} \
    'BEGIN { printf "baseline / this: --version %.1fx faster, sim %.1fx faster\n", a / b, c / d }'
fi
