# lib.sh: what .ci/setup does, as functions that tests/cli/setup.sh can run
# with stand-ins for apt-get and the build (sourced, never run alone).

# apt_get ARGS...: apt-get ARGS, waiting while another apt-get, dpkg or
# unattended-upgrade holds apt's lock (a fresh machine often runs one at
# boot): one message when the wait starts, one line a minute while it lasts,
# at most APT_LOCK_WAIT_S seconds (default 1800). Other failures are shown
# and returned at once.
apt_get() {
  local err waited=0 announced=0 limit=${APT_LOCK_WAIT_S:-1800} poll=${APT_LOCK_POLL_S:-5}
  err=$(mktemp)
  while true; do
    if apt-get "$@" 2>"$err"; then
      rm -f "$err"
      return 0
    fi
    if ! grep -qiE "could not get lock|unable to acquire .*lock|is another process using it" "$err"; then
      cat "$err" >&2
      rm -f "$err"
      return 1
    fi
    if [ "$waited" -ge "$limit" ]; then
      echo "setup: apt's lock is still held after ${waited} s; giving up:" >&2
      cat "$err" >&2
      rm -f "$err"
      return 1
    fi
    if [ "$announced" -eq 0 ]; then
      announced=1
      echo "setup: waiting for apt's lock ($(grep -io 'held by process.*' "$err" | head -1 ||
        echo 'another apt-get or dpkg is running'))..." >&2
    elif [ $((waited % 60)) -lt "$poll" ]; then
      echo "setup: still waiting for apt's lock (${waited} s)" >&2
    fi
    sleep "$poll"
    waited=$((waited + poll))
  done
}

# build_progress LOG: reads a build's output (make's "[ 42%]" or ninja's
# "[12/345]") on stdin, keeps all of it in LOG and prints one line each time
# the build passes another tenth, so that a CI log shows it moving in ten
# lines rather than hundreds (or none for minutes).
build_progress() {
  local log=$1 line pct shown=0
  : >"$log"
  while IFS= read -r line; do
    printf '%s\n' "$line" >>"$log"
    pct=
    if [[ $line =~ ^\[\ *([0-9]+)%\] ]]; then
      pct=${BASH_REMATCH[1]}
    elif [[ $line =~ ^\[([0-9]+)/([0-9]+)\] ]]; then
      pct=$((100 * BASH_REMATCH[1] / BASH_REMATCH[2]))
    fi
    if [ -n "$pct" ] && [ $((pct / 10)) -gt $((shown / 10)) ]; then
      shown=$pct
      echo "setup: building... ${pct}% ($(date -u +%H:%M:%S))" >&2
    fi
  done
}
