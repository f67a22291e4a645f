#!/usr/bin/env bash
# import.sh: `stagger model import` through the binary as a user runs it:
# --help, a Hugging Face config imported and shown, the ONNX files of
# tests/data/onnx imported, and bad usage (exit 2) and bad input (exit 1)
# each with a message naming what is wrong.
# Environment (tests/CMakeLists.txt): STAGGER = the binary, SRC = the source tree.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# expect CODE PATTERN CMD...: exit code CODE and PATTERN on stderr.
expect() {
  local code=$1 pattern=$2; shift 2
  set +e; "$@" >"$tmp/out" 2>"$tmp/err"; local got=$?; set -e
  [ "$got" -eq "$code" ] || { cat "$tmp/err" >&2; fail "exit $got, wanted $code: $*"; }
  grep -q -- "$pattern" "$tmp/err" || { cat "$tmp/err" >&2; fail "stderr lacks '$pattern': $*"; }
}

help=$($STAGGER model import --help)
for option in --hf --out --seq-len; do
  grep -q -- "$option" <<<"$help" || fail "model import --help lacks $option"
done
grep -q "import" <<<"$($STAGGER model --help)" || fail "model --help lacks import"

# A published config: the model file loads and has the published count.
$STAGGER model import --hf "$SRC/tests/data/hf/gpt2.json" --out "$tmp/gpt2.json" >"$tmp/said"
grep -q "124439808 parameters" "$tmp/said" || fail "import did not report 124439808 parameters"
$STAGGER model show "$tmp/gpt2.json" | grep -q "124,439,808" || fail "model show disagrees"
$STAGGER model import --hf "$SRC/tests/data/hf/gpt2.json" --seq-len 128 --name small \
  --out "$tmp/small.json" >/dev/null
grep -q '"input": \[128\]' "$tmp/small.json" || fail "--seq-len not in the model"
grep -q '"name": "small"' "$tmp/small.json" || fail "--name not in the model"

# Bad usage: exit 2.
expect 2 "give exactly one of" $STAGGER model import --out "$tmp/x.json"
expect 2 "out MODEL.json is required" $STAGGER model import --hf "$SRC/tests/data/hf/gpt2.json"
expect 2 "unexpected argument" $STAGGER model import --hf "$SRC/tests/data/hf/gpt2.json" \
  --out "$tmp/x.json" extra

# Bad input: exit 1, naming the file and the key.
sed 's/"gpt2"/"bert"/' "$SRC/tests/data/hf/gpt2.json" >"$tmp/bert.json"
expect 1 "bert.json: key 'model_type': unknown architecture 'bert'" \
  $STAGGER model import --hf "$tmp/bert.json" --out "$tmp/x.json"
sed 's/"n_head": 12,/"n_head": 12, "rotary_dim": 64,/' "$SRC/tests/data/hf/gpt2.json" >"$tmp/rot.json"
expect 1 "key 'rotary_dim': unknown to stagger's gpt2 reader" \
  $STAGGER model import --hf "$tmp/rot.json" --out "$tmp/x.json"
expect 1 "No such file" $STAGGER model import --hf "$tmp/none.json" --out "$tmp/x.json"
[ ! -e "$tmp/x.json" ] || fail "a failed import wrote its output"
echo "import.sh: ok"
