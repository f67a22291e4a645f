#!/usr/bin/env bash
# plot.sh: `stagger plot` as a user runs it, on a two-strategy simulation:
# PNG by default (each run, then the overlays), SVG, text for a terminal,
# and the exit codes of bad usage.
# Environment (tests/CMakeLists.txt): STAGGER = the binary, SRC = the source
# tree, GNUPLOT = gnuplot's path or empty.
set -euo pipefail

if [[ -z "${GNUPLOT:-}" ]]; then
  echo "SKIP: no gnuplot"
  exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# PNG files start with these 8 bytes.
is_png() {
  [[ -s $1 ]] && [[ $(head -c 8 "$1" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]]
}

"$STAGGER" sim --model "$SRC/models/mlp.json" --cluster "$SRC/models/clusters/dgx-h100.json" \
  --strategy dp,zero --gpus 4 --out "$tmp/run" >/dev/null

# One subdirectory per strategy, each a run.
runs=()
for dir in "$tmp"/run/*/; do
  [[ -f $dir/memory.csv ]] && runs+=("${dir%/}")
done
[[ ${#runs[@]} -eq 2 ]] || fail "expected 2 run directories in $tmp/run, found ${#runs[@]}"

"$STAGGER" plot "$tmp/run" >"$tmp/written"
for run in "${runs[@]}"; do
  for plot in memory comm groups links gantt; do
    is_png "$run/$plot.png" || fail "$run/$plot.png is not a PNG"
    grep -qxF "$run/$plot.png" "$tmp/written" || fail "$run/$plot.png not listed on stdout"
  done
done
for plot in compare_memory compare_comm; do
  is_png "$tmp/run/$plot.png" || fail "$tmp/run/$plot.png is not a PNG"
  grep -qxF "$tmp/run/$plot.png" "$tmp/written" || fail "$plot.png not listed on stdout"
done
[[ $(wc -l <"$tmp/written") -eq 12 ]] || fail "expected 12 files listed, got: $(cat "$tmp/written")"
if compgen -G "$tmp/run/*.tmp" >/dev/null || compgen -G "$tmp/run/*/*.tmp" >/dev/null; then
  fail "temporary files left behind"
fi

# SVG of one run.
"$STAGGER" plot "${runs[0]}" --format svg >"$tmp/written"
for plot in memory comm groups links gantt; do
  grep -q "<svg" "${runs[0]}/$plot.svg" || fail "${runs[0]}/$plot.svg is not SVG"
done

# Text for a terminal: the plots on stdout, no file listed.
"$STAGGER" plot "${runs[0]}" --format dumb >"$tmp/text"
grep -q "memory per GPU" "$tmp/text" || fail "dumb output has no memory plot"
grep -q "time (ms)" "$tmp/text" || fail "dumb output has no time axis"
grep -q "busiest links" "$tmp/text" || fail "dumb output has no busiest-links plot"
if grep -q "^/" "$tmp/text"; then fail "dumb output lists files"; fi

# Bad usage exits 2; a directory without outputs exits 1.
expect_exit() {
  local want=$1
  shift
  local rc=0
  "$@" >/dev/null 2>"$tmp/err" || rc=$?
  [[ $rc -eq $want ]] || fail "'$*' exited $rc, expected $want: $(cat "$tmp/err")"
}
expect_exit 2 "$STAGGER" plot
expect_exit 2 "$STAGGER" plot "$tmp/run" --format gif
expect_exit 2 "$STAGGER" plot "$tmp/run" "$tmp/run"
expect_exit 2 "$STAGGER" plot --no-such-option "$tmp/run"
mkdir "$tmp/empty"
expect_exit 1 "$STAGGER" plot "$tmp/empty"
grep -qF "$tmp/empty" "$tmp/err" || fail "the error does not name the directory"

grep -q -- "--format" <<<"$("$STAGGER" plot --help)" || fail "--help does not list --format"
echo "PASS"
