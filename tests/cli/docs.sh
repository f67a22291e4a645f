#!/usr/bin/env bash
# The docs and --help stay inside the repository: a user's clone has no
# ../shared or /work, so nothing may point there; every relative link of a
# Markdown page exists; no command's --help names a path above the working
# directory.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$SRC"

# The tracked kinds of text, outside build trees and runs.
files() {
  find . \( -path ./.git -o -path './build*' -o -path ./runs \) -prune -o -type f \
    \( -name '*.md' -o -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \
       -o -name '*.sh' -o -name '*.gp' -o -name '*.txt' -o -name '*.json' -o -name setup \
       -o -name run \) -print
}

bad=$(files | grep -v '^./tests/cli/docs.sh$' | xargs grep -nE '\.\./shared|shared/(PAPERS|DESIGN|STYLE)\.md|shared/data|/work/' \
        /dev/null || true)
[ -z "$bad" ] || { echo "$bad" >&2; fail "text points outside the repository"; }

# Relative links of Markdown pages.
while IFS= read -r page; do
  dir=$(dirname "$page")
  while IFS= read -r target; do
    target=${target%%#*}
    [ -z "$target" ] && continue
    [ -e "$dir/$target" ] || fail "$page links to $target, which is not there"
  done < <(grep -oE '\]\([^)]+\)' "$page" | sed -E 's/^\]\((.*)\)$/\1/' | grep -vE '^(https?|mailto):' || true)
done < <(files | grep '\.md$')

# --help of every command.
SRC=$(pwd -P)
for cmd in $("$STAGGER" --help | awk '/^Commands:/ {on = 1; next} on && /^  [a-z]/ {print $1}'); do
  # The build's own data folder (the source tree) is where it reads models.
  help=$("$STAGGER" "$cmd" --help-all 2>/dev/null || "$STAGGER" "$cmd" --help)
  if grep -nE '\.\./|/work/' <<<"${help//$SRC/}"; then
    fail "stagger $cmd --help points outside the repository"
  fi
done
echo "docs: ok"
