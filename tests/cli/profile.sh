#!/usr/bin/env bash
# `stagger profile` through the binary on the host backend: kernels of a
# tiny model (with --sharing), links among local ranks, the device and the
# machine named in the files, the simulator using them, progress on stderr,
# and bad usage (exit 2) or failures (exit 1) with clear messages. Timings
# are never checked: a host is noisy.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$SRC/tests/cli/lib/common.sh"

M=$SRC/tests/data/exec/tiny-mlp.json
FAST=(--backend host --warmup 1 --repeats 3 --sizes 1KiB:4KiB)

# Help (captured first: grep -q may close the pipe early).
$STAGGER profile --help >"$tmp/help"
for word in --batches --links --sharing --sizes --ranks --precision --warmup --repeats \
            "import deeppool FILE" algbw; do
  grep -q -- "$word" "$tmp/help" || fail "profile --help lacks $word"
done

# Bad usage: exit 2, naming what is wrong.
expect 2 "missing command" $STAGGER profile
expect 2 "out FILE is required" $STAGGER profile --model "$M" --batches 1
expect 2 "needs --batches" $STAGGER profile --model "$M" --out "$tmp/x.json"
expect 2 "not both" $STAGGER profile --model "$M" --batches 1 --links --out "$tmp/x.json"
expect 2 "'0' is not an integer >= 1" $STAGGER profile --model "$M" --batches 1,0 --out "$tmp/x.json"
expect 2 "'x' is not an integer" $STAGGER profile --model "$M" --batches x --out "$tmp/x.json"
expect 2 "expected auto, host or cuda" $STAGGER profile --model "$M" --batches 1 --backend tpu \
  --out "$tmp/x.json"
expect 2 "expected MIN:MAX" $STAGGER profile --links --sizes 1KiB --out "$tmp/x.json"
expect 2 "MIN <= MAX" $STAGGER profile --links --sizes 4KiB:1KiB --out "$tmp/x.json"
expect 2 "'1' is not an integer >= 2" $STAGGER profile --links --ranks 1 --out "$tmp/x.json"
expect 2 "are for --links" $STAGGER profile --model "$M" --batches 1 --ranks 2 --out "$tmp/x.json"
expect 2 "are for --model" $STAGGER profile --links --sharing --out "$tmp/x.json"
expect 2 "precision" $STAGGER profile --model "$M" --batches 1 --precision fp8 --out "$tmp/x.json"
expect 2 "repeats" $STAGGER profile --model "$M" --batches 1 --repeats 0 --out "$tmp/x.json"
expect 2 "give one" $STAGGER profile --model "$M" --batches 1 --device A \
  --cluster "$SRC/models/clusters/dgx-h100.json" --out "$tmp/x.json"
# Failures: exit 1, naming the file.
expect 1 "nosuch.json" $STAGGER profile --model "$tmp/nosuch.json" --batches 1 --out "$tmp/x.json"
expect 1 "nccl" $STAGGER profile --links "${FAST[@]}" --comm nccl --out "$tmp/x.json"
if ! nvidia-smi -L >/dev/null 2>&1; then
  expect 1 "cuda\|CUDA" $STAGGER profile --model "$M" --batches 1 --backend cuda --out "$tmp/x.json"
fi
[ ! -e "$tmp/x.json" ] || fail "a failed profile wrote its file"

# Kernels with sharing: the device, driver/date facts and the machine in the file.
P=$tmp/host/tiny-mlp.json
$STAGGER profile --model "$M" --batches 1,2,4 --sharing "${FAST[@]}" --out "$P" \
  >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err" >&2; fail "profile --model"; }
grep -q "^\[1/[0-9]*\] fc1 fwd batch 1$" "$tmp/err" || fail "no progress lines on stderr"
grep -q "device 'host'" "$tmp/out" || fail "summary does not name the device"
grep -q '"device":[[:space:]]*"host"' "$P" || fail "file does not name the device"
grep -q '"machine":[[:space:]]*"host: [0-9]* CPU cores' "$P" || fail "file does not describe the machine"
grep -q '"date":' "$P" || fail "file has no date"
grep -q '"precision":[[:space:]]*"fp32"' "$P" || fail "file has no precision"
grep -q '"fill":' "$P" || fail "--sharing wrote no fill"
grep -q '"sharing":' "$P" || fail "--sharing wrote no measurements"
grep -q '"pass":[[:space:]]*"optim"' "$P" || fail "no optimizer entries"
grep -q '"kind":[[:space:]]*"h2d"' "$P" || fail "no copies"
for layer in fc1 relu1 fc2 loss; do
  for pass in fwd bwd; do
    n=$(tr -d '\n\t ' <"$P" | grep -o "\"name\":\"$layer\",\"signature\":\"[^\"]*\",\"pass\":\"$pass\"" | wc -l)
    [ "$n" -ge 3 ] || fail "$layer $pass: $n entries in the layers and sharing sections"
  done
done

# Named after a cluster's GPU, the simulator uses it: no roofline op left.
Q=$tmp/named.json
$STAGGER profile --model "$M" --batches 2 "${FAST[@]}" \
  --cluster "$SRC/models/clusters/dgx-h100.json" --out "$Q" >/dev/null 2>&1
grep -q '"device":[[:space:]]*"H100-SXM"' "$Q" || fail "--cluster did not name the entries"
$STAGGER sim --model "$M" --cluster "$SRC/models/clusters/dgx-h100.json" --profile "$Q" \
  --gpus 1 --ranks 2 --micro-batch 2 --steps 2 --out "$tmp/sim" >/dev/null 2>&1
grep -q '"profiled":' "$tmp/sim/report.json" || fail "the simulator did not use the profile"
if grep -q '"roofline":' "$tmp/sim/report.json"; then fail "roofline ops left"; fi

# Links among local ranks: every collective, send_recv, algbw and busbw.
L=$tmp/links.json
$STAGGER profile --links "${FAST[@]}" --ranks 2,3 --out "$L" >"$tmp/out" 2>"$tmp/err" ||
  { cat "$tmp/err" >&2; fail "profile --links"; }
for c in all_reduce reduce_scatter all_gather broadcast reduce send_recv; do
  grep -q "\"collective\":[[:space:]]*\"$c\"" "$L" || fail "links lack $c"
done
grep -q '"link":[[:space:]]*"local"' "$L" || fail "links are not local"
grep -q '"busbw_GBps":' "$L" || fail "links lack busbw"
grep -q "22 link entries" "$tmp/out" || fail "links: $(cat "$tmp/out")"

# import deeppool is still there.
expect 2 "expected import" $STAGGER profile frobnicate
echo "ok"
