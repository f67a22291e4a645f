#!/usr/bin/env bash
# Output folders as a user meets them (sim/output/outdir.h): --out written
# aside and replaced whole, never mixed with an earlier run; a folder stagger
# did not write refused unless --force; a full disk leaves --out as it was;
# every folder says in manifest.json which command wrote it; Ctrl-C during
# `stagger run` writes what was measured, marked partial, runs no further
# strategy and exits 130.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
M=$SRC/models/mlp.json
C=$SRC/models/clusters/dgx-h100.json
source "$SRC/tests/cli/lib/common.sh"
leftovers() { find "$tmp" -maxdepth 2 -name '.*.stagger-*' | grep -q . && fail "temporary folders left: $(find "$tmp" -name '.*.stagger-*')" || true; }
cd "$tmp"

# A re-used --out holds the new run only: no stale strategy folder beside it.
$STAGGER sim --model $M --cluster $C --gpus 4 --strategy dp,zero --out r >/dev/null 2>&1
$STAGGER sim --model $M --cluster $C --gpus 4 --strategy cdp,pipeline --out r >/dev/null 2>&1
[ "$(ls r | tr '\n' ' ')" = "cdp manifest.json pipeline " ] || fail "r holds: $(ls r | tr '\n' ' ')"
grep -q '"status":[[:space:]]*"complete"' r/manifest.json || fail "manifest not complete"
grep -q '"command":[[:space:]]*"stagger sim --model .* --strategy cdp,pipeline --out r"' r/manifest.json ||
  fail "manifest does not name the command"
grep -q '"stagger":[[:space:]]*"[0-9]' r/manifest.json || fail "manifest has no version"
grep -qE '"date":[[:space:]]*"20[0-9-]+T[0-9:]+Z"' r/manifest.json || fail "manifest has no date"
if [[ -n "${GNUPLOT:-}" ]]; then
  $STAGGER plot r >"$tmp/plots"
  grep -q "r/dp/" "$tmp/plots" && fail "stagger plot drew a stale run"
  grep -q "r/cdp/memory.png" "$tmp/plots" || fail "stagger plot did not draw cdp"
fi
# A file put into stagger's output is the user's: the manifest lists what
# stagger wrote (plot's figures added to it), so the folder is refused
# without --force and the file kept.
grep -q '"files":' r/manifest.json || fail "the manifest lists no files"
grep -q '"cdp/report.json"' r/manifest.json || fail "the manifest does not list cdp/report.json"
echo "my notes" >r/cdp/notes.txt
expect 2 "r already holds files that stagger did not write" \
  $STAGGER sim --model $M --cluster $C --gpus 4 --strategy dp --out r
[ "$(cat r/cdp/notes.txt)" = "my notes" ] || fail "the user's notes were touched"
rm r/cdp/notes.txt
if [[ -n "${GNUPLOT:-}" ]]; then
  grep -q '"cdp/memory.png"' r/manifest.json || fail "plot's figures are not in the manifest"
fi
# One strategy after two: the folder is the one run's, not a mix.
$STAGGER sim --model $M --cluster $C --gpus 4 --strategy dp --out r >/dev/null 2>&1
[ -f r/report.json ] && [ ! -e r/cdp ] || fail "a single run was mixed with the earlier ones"
leftovers

# What stagger did not write is refused (exit 2, nothing touched) unless --force.
mkdir mine && echo precious >mine/thesis.tex
expect 2 "mine already holds files that stagger did not write.*--force" \
  $STAGGER sim --model $M --cluster $C --gpus 4 --out mine
[ "$(cat mine/thesis.tex)" = precious ] && [ "$(ls mine)" = thesis.tex ] || fail "mine was touched"
echo x >afile
expect 2 "afile already holds a file" $STAGGER sim --model $M --cluster $C --out afile
expect 2 "mine already holds files" $STAGGER plan --model $M --cluster $C --gpus 1,2 --out mine
expect 2 "mine already holds files" $STAGGER run --model $M --backend host --steps 1 --out mine
expect 2 "mine already holds files" $STAGGER validate --model $M --backend host \
  --profile $SRC/traces/profiles/host --out mine
$STAGGER sim --model $M --cluster $C --gpus 4 --out mine --force >/dev/null 2>&1
[ ! -e mine/thesis.tex ] && [ -f mine/manifest.json ] || fail "--force did not replace mine"
# An empty folder is fine; the current directory never is.
mkdir empty && $STAGGER sim --model $M --cluster $C --out empty >/dev/null 2>&1 ||
  fail "an empty --out was refused"
expect 2 "current directory" $STAGGER sim --model $M --cluster $C --out . --force
expect 2 "current directory" $STAGGER sim --model $M --cluster $C --out .. --force
leftovers

# A full disk (here: a file size limit) fails, and leaves --out as it was.
cp -r r r.before
set +e
(trap '' XFSZ; ulimit -f 4; $STAGGER sim --model $M --cluster $C --gpus 4 --strategy dp,zero \
   --out r >/dev/null 2>"$tmp/err")
rc=$?
set -e
[ "$rc" -eq 1 ] || { cat "$tmp/err" >&2; fail "a failed write exited $rc"; }
grep -q "File too large" "$tmp/err" || { cat "$tmp/err" >&2; fail "no message for the failed write"; }
diff -r r r.before >/dev/null || fail "a failed run changed r"
leftovers

# interrupt ARGS...: `stagger run ARGS` of 100000 steps on the host, sent
# SIG (INT unless set) once dp has run a while; its exit code must be 130
# (143 for TERM, what batch schedulers send), and no strategy after dp may
# start.
interrupt() {
  $STAGGER run --model $M --ranks 2 --micro-batch 4 --steps 100000 --backend host "$@" \
    >"$tmp/out" 2>"$tmp/err" &
  local pid=$! rc
  for _ in $(seq 100); do grep -q "dp: running" "$tmp/err" && break; sleep 0.1; done
  sleep 1.5
  kill -"${SIG:-INT}" $pid
  set +e; wait $pid; rc=$?; set -e
  local want=130
  [ "${SIG:-INT}" = TERM ] && want=143
  [ "$rc" -eq $want ] || { cat "$tmp/err" >&2; fail "SIG${SIG:-INT} exited $rc, wanted $want: $*"; }
  if grep -q "zero: running\|cdp: running" "$tmp/err"; then fail "a strategy ran after Ctrl-C: $*"; fi
}

# Ctrl-C during a run of three strategies: the first one's steps so far are
# written, marked partial; the others never start.
interrupt --strategy dp,zero,cdp --out ctrlc
grep -q "interrupted (Ctrl-C) during 'dp' after [0-9]* of 100000 steps; not run: 'zero', 'cdp'" "$tmp/err" ||
  { cat "$tmp/err" >&2; fail "the message does not say what was interrupted"; }
if grep -q "nothing measured" "$tmp/err"; then
  [ ! -e ctrlc ] || fail "nothing measured, yet ctrlc was written"
else
  [ "$(ls ctrlc | tr '\n' ' ')" = "dp manifest.json " ] || fail "ctrlc holds: $(ls ctrlc | tr '\n' ' ')"
  grep -q '"status":[[:space:]]*"partial"' ctrlc/manifest.json || fail "manifest not partial"
  grep -q "interrupted after [1-9][0-9]* of 100000 steps" ctrlc/dp/report.json ||
    fail "the report does not say it was interrupted"
fi
# Without --out: the same stop, nothing written.
interrupt --strategy dp,zero
leftovers
# SIGTERM as Ctrl-C: the steps measured so far kept, marked partial.
SIG=TERM interrupt --strategy dp,zero --out term
grep -q "interrupted (SIGTERM) during 'dp'" "$tmp/err" || { cat "$tmp/err" >&2; fail "SIGTERM message"; }
if ! grep -q "nothing measured" "$tmp/err"; then
  grep -q '"status":[[:space:]]*"partial"' term/manifest.json || fail "SIGTERM: manifest not partial"
fi
echo "outdir: ok"
