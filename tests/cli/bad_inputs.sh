#!/usr/bin/env bash
# The catalogue of bad inputs (tests/bad_inputs/cases.txt, its format in its
# header; docs/RELIABILITY.md): every case through the binary, checked for
# its exit code and message, and for what no bad input may cause: a crash or
# a hang, a sanitizer report, a GLib critical, an error printed twice.
#   bash tests/cli/bad_inputs.sh [NAME...]   runs every case, or the named ones
#   (STAGGER=build/stagger SRC=. in the environment; SHOW=1 prints every
#   case's message, to read them all at once)
set -uo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
M=$SRC/models
C=$M/clusters/dgx-h100.json
B=$SRC/tests/bad_inputs
D=$SRC/tests/data
R=$SRC/tests/fuzz/regressions
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# What no message may hold: a sanitizer's report, a GLib warning or critical
# (a g_return_if_fail that fired), an abort.
FORBIDDEN='runtime error|Sanitizer|CRITICAL|GLib-ERROR|GLib-WARNING|assertion|Aborted|core dumped'

# edit FILE SED: FILE changed by SED, under the case's folder with FILE's name.
edit() {
  local dir
  dir=$(mktemp -d -p "$T" edit.XXXX)
  sed -e "$2" "$1" >"$dir/$(basename "$1")" || return 1
  echo "$dir/$(basename "$1")"
}

# gen FORMAT N: an input of N nodes written by tests/readers.c (through
# bench_readers --write, built beside the binary), under the case's folder:
# the size cases (issue 23: every reader linear in its input) read it whole
# within the 60 s limit before refusing what is wrong at its end.
BENCH_READERS=${BENCH_READERS:-$(dirname "$STAGGER")/tests/bench_readers}
gen() {
  local dir
  dir=$(mktemp -d -p "$T" gen.XXXX)
  "$BENCH_READERS" --write "$1" "$2" "$dir" || return 1
}

declare -A seen=()
cases=0 failed=0
while IFS= read -r line; do
  [[ -z "${line// /}" || "$line" == \#* ]] && continue
  IFS='|' read -r name code message args <<<"$line"
  name=$(echo $name) code=$(echo $code)
  message=${message# } message=${message% } args=${args# }
  [ -n "${seen[$name]:-}" ] && { echo "FAIL: case '$name' is listed twice" >&2; failed=$((failed + 1)); }
  seen[$name]=1
  if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then continue; fi
  cases=$((cases + 1))
  T=$tmp/$name
  mkdir -p "$T"
  why=""
  if ! eval "argv=($args)" 2>"$T/eval.err"; then
    why="cannot read the arguments: $(cat "$T/eval.err")"
  else
    (cd "$T" && exec timeout 60 "$STAGGER" "${argv[@]}") >"$T/out" 2>"$T/err" </dev/null
    got=$?
    if [ "$got" -eq 124 ]; then why="hung (killed after 60 s)"
    elif [ "$got" -ge 128 ]; then why="crashed (exit $got, signal $((got - 128)))"
    elif [ "$got" -ne "$code" ]; then why="exit $got, wanted $code"
    elif ! grep -qF -- "$message" "$T/err"; then why="stderr lacks: $message"
    elif grep -qE "$FORBIDDEN" "$T/err"; then why="stderr holds: $(grep -E "$FORBIDDEN" "$T/err" | head -1)"
    elif [ "$(grep -c '^stagger' "$T/err")" -gt 1 ]; then why="the error is printed more than once"
    fi
  fi
  [ -n "${SHOW:-}" ] && { echo "== $name ($got)"; head -3 "$T/err"; }
  if [ -n "$why" ]; then
    failed=$((failed + 1))
    echo "FAIL: $name: $why" >&2
    echo "  stagger $args" >&2
    sed 's/^/  | /' "$T/err" 2>/dev/null | head -8 >&2
  fi
done <"$B/cases.txt"

echo "bad inputs: $cases cases, $failed failed"
[ "$failed" -eq 0 ] || exit 1
# The catalogue keeps its promise of breadth (docs/RELIABILITY.md).
[ $# -gt 0 ] || [ "$cases" -ge 60 ] || { echo "FAIL: only $cases cases" >&2; exit 1; }
