#!/usr/bin/env bash
# .ci/setup's parts (.ci/lib.sh) with stand-ins: apt-get waits for a held
# lock with a message instead of failing at once, other apt failures still
# fail, and the build shows its progress in about ten lines.
set -euo pipefail
: "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
source "$SRC/.ci/lib.sh"
grep -q "apt_get update" "$SRC/.ci/setup" || fail ".ci/setup does not wait for apt's lock"
grep -q "| build_progress" "$SRC/.ci/setup" || fail ".ci/setup does not show the build's progress"

# An apt-get that finds the lock held twice, then works.
mkdir "$tmp/bin"
cat >"$tmp/bin/apt-get" <<'FAKE'
#!/usr/bin/env bash
n=$(cat "$COUNT" 2>/dev/null || echo 0); echo $((n + 1)) >"$COUNT"
case "$MODE" in
  lock) if [ "$n" -lt 2 ]; then
          echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (apt-get)" >&2
          echo "E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), is another process using it?" >&2
          exit 100
        fi; echo "installed $*";;
  broken) echo "E: Unable to locate package nosuchpackage" >&2; exit 100;;
esac
FAKE
chmod +x "$tmp/bin/apt-get"
export COUNT=$tmp/count
PATH=$tmp/bin:$PATH MODE=lock APT_LOCK_POLL_S=0 apt_get install -y x >"$tmp/out" 2>"$tmp/err" ||
  { cat "$tmp/err" >&2; fail "apt_get gave up on a lock that was released"; }
[ "$(cat "$COUNT")" -eq 3 ] || fail "apt-get ran $(cat "$COUNT") times, wanted 3"
grep -q "waiting for apt's lock (held by process 4242 (apt-get))" "$tmp/err" ||
  { cat "$tmp/err" >&2; fail "no message while waiting for the lock"; }
[ "$(grep -c waiting "$tmp/err")" -eq 1 ] || fail "the wait was announced more than once"
grep -q "installed install -y x" "$tmp/out" || fail "apt-get's output was lost"

rm -f "$COUNT"
set +e
PATH=$tmp/bin:$PATH MODE=broken APT_LOCK_POLL_S=0 apt_get install nosuchpackage 2>"$tmp/err"
rc=$?
set -e
[ "$rc" -ne 0 ] || fail "a missing package did not fail"
[ "$(cat "$COUNT")" -eq 1 ] || fail "a failure that is not the lock was retried"
grep -q "Unable to locate package nosuchpackage" "$tmp/err" || fail "apt-get's error was hidden"

rm -f "$COUNT"
set +e
PATH=$tmp/bin:$PATH MODE=lock APT_LOCK_POLL_S=1 APT_LOCK_WAIT_S=1 apt_get install x 2>"$tmp/err"
rc=$?
set -e
[ "$rc" -ne 0 ] || fail "a lock held past APT_LOCK_WAIT_S did not fail"
grep -q "giving up" "$tmp/err" || fail "no message when giving up on the lock"

# Progress: 200 lines of make output become about ten, all kept in the log.
for i in $(seq 0 199); do printf '[%3d%%] Building C object sim/x%d.c.o\n' $((i / 2)) "$i"; done |
  build_progress "$tmp/build.log" 2>"$tmp/progress"
[ "$(wc -l <"$tmp/build.log")" -eq 200 ] || fail "the build log lost lines"
lines=$(wc -l <"$tmp/progress")
[ "$lines" -ge 9 ] && [ "$lines" -le 11 ] || { cat "$tmp/progress" >&2; fail "$lines progress lines"; }
grep -q "building... 90%" "$tmp/progress" || fail "no progress line at 90%"
# Ninja counts steps.
for i in $(seq 1 50); do echo "[$i/50] Building C object x$i.o"; done |
  build_progress "$tmp/ninja.log" 2>"$tmp/progress"
grep -q "building... 100%" "$tmp/progress" || { cat "$tmp/progress" >&2; fail "ninja's progress not shown"; }
echo "setup: ok"
