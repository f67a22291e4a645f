#!/usr/bin/env bash
# Runs every libFuzzer target of a STAGGER_FUZZ build (the sanitize preset),
# seeded from the shipped files and the target's regression inputs
# (docs/RELIABILITY.md).
#
#   tests/fuzz/run.sh BUILD_DIR [--seconds S] [--seed N] [TARGET...]
#
# Without --seconds, the run CI makes: each target for the fixed number of
# inputs tests/fuzz/ci-runs.txt gives it, from --seed (default 1). The same
# tree, compiler and seed give the same inputs here and in CI, so what
# passes here passes there. With --seconds S, an exploratory run: each
# target for S seconds, --seed 0 (default there) a new random seed each time,
# e.g. `tests/fuzz/run.sh build-sanitize --seconds 600 import_onnx`.
#
# A crash, leak, sanitizer report, GLib warning, timeout (10 s on one input)
# or an input that takes more than 2 GiB stops the target and fails the run;
# the input is left in BUILD_DIR/fuzz/NAME/ as crash-*, leak-*, timeout-* or
# oom-*. Make it a regression: copy it to tests/fuzz/regressions/NAME/
# under a name that says what it was, fix the cause, and the replay (ctest
# fuzz_replay) runs it in every build from then on.
set -uo pipefail
usage="usage: tests/fuzz/run.sh BUILD_DIR [--seconds S] [--seed N] [TARGET...]"
build=$(cd "${1:?$usage}" && pwd) || exit 2
shift
seconds= seed=
targets=()
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=${2:?$usage}; shift 2 ;;
    --seed) seed=${2:?$usage}; shift 2 ;;
    -*) echo "$usage" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
src=$(cd "$(dirname "$0")/../.." && pwd)
replay=$build/tests/fuzz/fuzz_replay
ci_runs=$src/tests/fuzz/ci-runs.txt

if [ ${#targets[@]} -eq 0 ]; then
  for f in "$build"/tests/fuzz/fuzz_*; do
    name=$(basename "$f")
    [ "$name" = fuzz_replay ] || [ ! -x "$f" ] || targets+=("${name#fuzz_}")
  done
fi
[ ${#targets[@]} -gt 0 ] || { echo "fuzz: no fuzz_* binaries in $build/tests/fuzz (configure with STAGGER_FUZZ=ON)" >&2; exit 2; }

# The budget of one target: -max_total_time, or CI's fixed -runs.
budget_of() {
  if [ -n "$seconds" ]; then
    echo "-max_total_time=$seconds"
    return
  fi
  local runs
  runs=$(awk -v t="$1" '$1 == t { print $2 }' "$ci_runs")
  if [ -z "$runs" ]; then
    echo "fuzz: $1 has no row in tests/fuzz/ci-runs.txt: give it a number of inputs there, so that CI fuzzes it" >&2
    return 1
  fi
  echo "-runs=$runs"
}

# libFuzzer runs the seeds by size, and seeds of one size in the order the
# filesystem lists them, which differs between machines (and with it every
# input after). So no two may have one size: a text seed (JSON) takes
# trailing newlines until its size is its own; binary seeds of one size are
# an error, for their owner to resolve.
distinct_sizes() {
  local f size
  local -A taken=()
  for f in $(ls "$1" | LC_ALL=C sort); do
    f=$1/$f
    size=$(stat -c %s "$f")
    while [ -n "${taken[$size]:-}" ]; do
      if ! grep -Iq . "$f"; then
        echo "fuzz: $(basename "$f") and ${taken[$size]} are binary seeds of one size, $size bytes: libFuzzer would run them in an order that differs between machines" >&2
        return 1
      fi
      echo >>"$f"
      size=$((size + 1))
    done
    taken[$size]=$(basename "$f")
  done
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
seed=${seed:-$([ -n "$seconds" ] && echo 0 || echo 1)}
failed=0
for name in "${targets[@]}"; do
  budget=$(budget_of "$name") || { failed=1; continue; }
  work=$build/fuzz/$name
  rm -rf "$work/corpus"
  mkdir -p "$work/corpus"
  # The corpus starts from the seeds and the regressions; what it grows
  # stays in BUILD_DIR, never in the source tree.
  while IFS= read -r file; do cp "$file" "$work/corpus/"; done < <("$replay" --seeds "$name")
  [ -d "$src/tests/fuzz/regressions/$name" ] && cp "$src/tests/fuzz/regressions/$name"/* "$work/corpus/" 2>/dev/null
  distinct_sizes "$work/corpus" || { failed=1; continue; }
  # Long enough for the largest seed (ONNX files run to 140 kB).
  max_len=$(stat -c %s "$work"/corpus/* | sort -n | tail -1)
  max_len=$((max_len > 65536 ? max_len : 65536))
  start=$(date +%s)
  # CPU seconds too: on a shared machine they, not the wall clock, size ci-runs.txt.
  TIMEFORMAT='%U %S'
  { time (cd "$work" && "$build/tests/fuzz/fuzz_$name" "$budget" -seed="$seed" -timeout=10 \
     -rss_limit_mb=2048 -max_len=$max_len -dict="$src/tests/fuzz/json.dict" -print_final_stats=1 \
     -reload=0 -artifact_prefix="$work/" corpus >"$work/log" 2>&1); } 2>"$work/cpu"
  rc=$?
  cpu=$(awk '{ printf "%.0f", $1 + $2 }' "$work/cpu")
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/log" | grep -o '[0-9]*$')
  used=$(grep -o 'Seed: [0-9]*' "$work/log" | head -1 | grep -o '[0-9]*$')
  echo "fuzz: $name: ${runs:-?} inputs in $(($(date +%s) - start)) s, $cpu s of CPU ($budget -seed=${used:-$seed}), exit $rc"
  if [ $rc -ne 0 ]; then
    failed=1
    grep -E 'ERROR|runtime error|SUMMARY|CRITICAL|WARNING|Test unit written|deadly signal' "$work/log" | head -8 >&2
    [ $rc -gt 128 ] && tail -n 20 "$work/log" >&2
    echo "fuzz: $name: the input is in $work/ (all of the log: $work/log)" >&2
  fi
done
exit $failed
