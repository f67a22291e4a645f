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
source "$SRC/tests/cli/lib/common.sh"

help=$($STAGGER model import --help)
for option in --hf --onnx --out --seq-len --no-loss --dim; do
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

# Duplicate keys as Python's json reads them (transformers): the last wins.
# n_layer 6 then 12 is GPT-2 small again; 12 then 6 is not.
sed 's/  "n_layer": 12,/  "n_layer": 6,\n  "n_layer": 12,/' "$SRC/tests/data/hf/gpt2.json" >"$tmp/dup.json"
grep -c '"n_layer"' "$tmp/dup.json" | grep -q 2 || fail "the duplicate key was not written"
$STAGGER model import --hf "$tmp/dup.json" --out "$tmp/dup-model.json" >"$tmp/said"
grep -q "124439808 parameters" "$tmp/said" || { cat "$tmp/said"; fail "a duplicate key: not the last value"; }
sed 's/  "n_layer": 12,/  "n_layer": 12,\n  "n_layer": 6,/' "$SRC/tests/data/hf/gpt2.json" >"$tmp/dup6.json"
$STAGGER model import --hf "$tmp/dup6.json" --out "$tmp/dup6-model.json" >"$tmp/said"
if grep -q "124439808 parameters" "$tmp/said"; then fail "a duplicate key: the first value kept"; fi

# Every architecture's published config imports with its published count.
while read -r file count; do
  $STAGGER model import --hf "$SRC/tests/data/hf/$file.json" --out "$tmp/$file.json" \
    >"$tmp/said" 2>/dev/null
  grep -q " $count parameters" "$tmp/said" || fail "$file: not $count parameters"
done <<'LIST'
llama-2-7b 6738415616
llama-3-8b 8030261248
mistral-7b 7241732096
mixtral-8x7b 46702792704
qwen2-7b 7615616512
pythia-160m 162322944
LIST
$STAGGER model show "$tmp/mixtral-8x7b.json" | grep -q "12,879,925,248" ||
  fail "mixtral's active parameters not shown"
# An imported LLM simulates as it is (a short sequence keeps it quick).
$STAGGER model import --hf "$SRC/tests/data/hf/pythia-160m.json" --seq-len 256 \
  --out "$tmp/pythia.json" >/dev/null
$STAGGER sim --model "$tmp/pythia.json" --cluster "$SRC/models/clusters/dgx-h100.json" \
  --strategy zero --zero-stage 2 --ranks 2 --steps 2 --out "$tmp/sim-pythia" >/dev/null 2>&1 ||
  fail "the imported pythia-160m does not simulate"

# An exported network: the ResNet-50 of tests/data/onnx is the zoo's.
$STAGGER model import --onnx "$SRC/tests/data/onnx/resnet50.onnx" --out "$tmp/r50.json" >"$tmp/said"
grep -q "25557032 parameters" "$tmp/said" || fail "onnx import did not report 25557032 parameters"
grep -q "0 custom layers" "$tmp/said" || fail "resnet50 needed custom layers"
diff <($STAGGER model show "$tmp/r50.json" | sed 1d) \
  <($STAGGER model show "$SRC/models/resnet50.json" | sed 1d) >/dev/null ||
  fail "imported resnet50 differs from models/resnet50.json"
# What no layer type describes is a custom layer, and a warning says so.
$STAGGER model import --onnx "$SRC/tests/data/onnx/mobilenet_v2.onnx" --out "$tmp/mb.json" \
  >/dev/null 2>"$tmp/warn"
grep -q "^warning: .*custom layers.*(Clip)" "$tmp/warn" || fail "no warning about ReLU6"
# The imported model simulates.
$STAGGER sim --model "$tmp/mb.json" --cluster "$SRC/models/clusters/dgx-h100.json" --ranks 2 \
  --steps 2 --out "$tmp/sim" >/dev/null 2>&1 || fail "the imported mobilenet_v2 does not simulate"
# Symbolic dims and no loss.
expect 1 "dim 1 has no size ('seq')" \
  $STAGGER model import --onnx "$SRC/tests/data/onnx/cases/symbolic_dim.onnx" --out "$tmp/x.json"
$STAGGER model import --onnx "$SRC/tests/data/onnx/cases/symbolic_dim.onnx" --dim seq=16 \
  --no-loss --out "$tmp/sym.json" >/dev/null
grep -q '"input": \[16, 8\]' "$tmp/sym.json" || fail "--dim seq=16 not in the model"
grep -q "softmax_cross_entropy" "$tmp/sym.json" && fail "--no-loss appended a loss"
expect 1 "node 'hardmax' (Hardmax): unsupported operator" \
  $STAGGER model import --onnx "$SRC/tests/data/onnx/cases/unsupported_op.onnx" --out "$tmp/x.json"
expect 2 "expected NAME=N" $STAGGER model import --onnx "$SRC/tests/data/onnx/resnet50.onnx" \
  --dim seq --out "$tmp/x.json"

# Bad usage: exit 2.
expect 2 "give exactly one of" $STAGGER model import --out "$tmp/x.json"
expect 2 "give exactly one of" $STAGGER model import --hf "$SRC/tests/data/hf/gpt2.json" \
  --onnx "$SRC/tests/data/onnx/resnet50.onnx" --out "$tmp/x.json"
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
