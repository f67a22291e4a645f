#!/usr/bin/env bash
# Runs every libFuzzer target of a STAGGER_FUZZ build (the sanitize preset)
# for a bounded time each, seeded from the shipped files and the target's
# regression inputs (docs/RELIABILITY.md).
#
#   tests/fuzz/run.sh BUILD_DIR [SECONDS_EACH] [TARGET...]
#
# A crash, leak, sanitizer report, timeout (10 s on one input) or an input
# that takes more than 2 GiB stops the target and fails the run; the input
# is left in BUILD_DIR/fuzz/NAME/ as crash-*, leak-*, timeout-* or oom-*.
# Make it a regression: copy it to tests/fuzz/regressions/NAME/ under a name
# that says what it was, fix the cause, and the replay (ctest fuzz_replay)
# runs it in every build from then on.
set -uo pipefail
build=$(cd "${1:?usage: tests/fuzz/run.sh BUILD_DIR [SECONDS_EACH] [TARGET...]}" && pwd)
seconds=${2:-60}
shift $(($# < 2 ? $# : 2))
src=$(cd "$(dirname "$0")/../.." && pwd)
replay=$build/tests/fuzz/fuzz_replay

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$build"/tests/fuzz/fuzz_*; do
    name=$(basename "$f")
    [ "$name" = fuzz_replay ] || [ ! -x "$f" ] || targets+=("${name#fuzz_}")
  done
fi
[ ${#targets[@]} -gt 0 ] || { echo "fuzz: no fuzz_* binaries in $build/tests/fuzz (configure with STAGGER_FUZZ=ON)" >&2; exit 2; }

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=0
for name in "${targets[@]}"; do
  work=$build/fuzz/$name
  rm -rf "$work/corpus"
  mkdir -p "$work/corpus"
  # The corpus starts from the seeds and the regressions; what it grows
  # stays in BUILD_DIR, never in the source tree.
  while IFS= read -r seed; do cp "$seed" "$work/corpus/"; done < <("$replay" --seeds "$name")
  [ -d "$src/tests/fuzz/regressions/$name" ] && cp "$src/tests/fuzz/regressions/$name"/* "$work/corpus/" 2>/dev/null
  # Long enough for the largest seed (ONNX files run to 140 kB).
  max_len=$(stat -c %s "$work"/corpus/* | sort -n | tail -1)
  max_len=$((max_len > 65536 ? max_len : 65536))
  start=$(date +%s)
  (cd "$work" && "$build/tests/fuzz/fuzz_$name" -max_total_time="$seconds" -timeout=10 \
     -rss_limit_mb=2048 -max_len=$max_len -dict="$src/tests/fuzz/json.dict" -print_final_stats=1 \
     -artifact_prefix="$work/" corpus >"$work/log" 2>&1)
  rc=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/log" | grep -o '[0-9]*$')
  echo "fuzz: $name: ${runs:-?} inputs in $(($(date +%s) - start)) s, exit $rc"
  if [ $rc -ne 0 ]; then
    failed=1
    grep -E 'ERROR|runtime error|SUMMARY|Test unit written' "$work/log" | head -8 >&2
    echo "fuzz: $name: the input is in $work/ (see the log there)" >&2
  fi
done
exit $failed
