#!/usr/bin/env bash
# Backends loaded on demand (exec/module.h): no process maps CUDA, cuBLAS or
# NCCL until it runs on a GPU, so `stagger --version` and `stagger sim` start
# in milliseconds; a missing or broken module is a clear message; the build
# tree and an installed tree both find the modules.
set -euo pipefail
: "${STAGGER:?path to the stagger binary}" "${SRC:?source tree}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
M=$SRC/models/mlp.json
C=$SRC/models/clusters/dgx-h100.json
BUILD=$(dirname "$STAGGER")
source "$SRC/tests/cli/lib/common.sh"
# gpu_libs CMD...: the CUDA / NCCL libraries the dynamic loader opens for CMD.
gpu_libs() { LD_DEBUG=files "$@" 2>&1 >/dev/null | grep -oE 'file=[^ ]*lib(cuda|cudart|cublas|cublasLt|nccl)\.[^ ]*' || true; }

# Nothing of CUDA's at start: not linked, not loaded, for commands that do
# not run on a device (and for a run on the host backend).
if ldd "$STAGGER" | grep -E 'lib(cudart|cublas|nccl)'; then fail "stagger links CUDA or NCCL"; fi
for cmd in "--version" "sim --model $M --cluster $C --steps 2" "plan --model $M --cluster $C --gpus 1,2 -q" \
           "run --model $M --backend host --steps 1"; do
  libs=$(gpu_libs $STAGGER $cmd)
  [ -z "$libs" ] || fail "stagger $cmd loads $libs"
done

built=$(grep -o 'modules *: [a-z ]*' "$BUILD/CMakeCache.txt" 2>/dev/null || true)
if [ ! -f "$BUILD/lib/stagger/libstagger-cuda.so" ]; then
  expect 1 "cuda device backend is not built in: this build found no CUDA toolkit" \
    $STAGGER run --model $M --backend cuda --steps 1
  echo "modules: no CUDA in this build; the rest needs the cuda module"
  exit 0
fi

# The cuda module loads here (all its symbols resolve) and says why it cannot
# run when there is no GPU; with a GPU, the run succeeds.
set +e; $STAGGER run --model $M --backend cuda --steps 1 >/dev/null 2>"$tmp/err"; rc=$?; set -e
if [ "$rc" -ne 0 ]; then
  grep -qE "no NVIDIA driver here|no CUDA device answers|older than this build's CUDA runtime" "$tmp/err" ||
    { cat "$tmp/err" >&2; fail "the cuda module did not load or gave no reason"; }
fi
# auto loads the module (to look for a GPU) and falls back to the host.
G_MESSAGES_DEBUG=all $STAGGER run --model $M --steps 1 >"$tmp/err" 2>&1 || fail "auto failed"
grep -q "loaded $BUILD/lib/stagger/libstagger-cuda.so (the build tree)" "$tmp/err" ||
  { cat "$tmp/err" >&2; fail "auto did not load the build tree's module"; }

# A module that is not there: a clear message naming the file and the folder;
# auto still runs on the host.
mkdir "$tmp/empty"
expect 1 "cuda device backend is a module, $tmp/empty/libstagger-cuda.so, which is not in $tmp/empty (\$STAGGER_MODULE_DIR)" \
  env STAGGER_MODULE_DIR="$tmp/empty" $STAGGER run --model $M --backend cuda --steps 1
expect 1 "nccl comm backend is a module" \
  env STAGGER_MODULE_DIR="$tmp/empty" $STAGGER run --model $M --backend host --comm nccl --steps 1
STAGGER_MODULE_DIR="$tmp/empty" $STAGGER run --model $M --steps 1 >/dev/null 2>&1 ||
  fail "auto did not fall back to the host without the module"
# A module that is not a library, and one that needs a library this machine
# lacks: the loader's complaint, said as what to do.
mkdir "$tmp/junk" && echo "not a library" >"$tmp/junk/libstagger-cuda.so"
expect 1 "cuda device backend: cannot load $tmp/junk/libstagger-cuda.so" \
  env STAGGER_MODULE_DIR="$tmp/junk" $STAGGER run --model $M --backend cuda --steps 1
if command -v cc >/dev/null; then
  mkdir "$tmp/needy"
  echo 'int st_absent(void) { return 0; }' >"$tmp/absent.c"
  cc -shared -fPIC -o "$tmp/libstagger-absent-dep.so" "$tmp/absent.c"
  echo 'int st_absent(void); int st_use(void) { return st_absent(); }' >"$tmp/needy.c"
  cc -shared -fPIC -o "$tmp/needy/libstagger-cuda.so" "$tmp/needy.c" -L"$tmp" -lstagger-absent-dep
  rm "$tmp/libstagger-absent-dep.so"
  expect 1 "cuda device backend needs libstagger-absent-dep.so, which this machine does not have" \
    env STAGGER_MODULE_DIR="$tmp/needy" $STAGGER run --model $M --backend cuda --steps 1
  # A library of the right name that is not a stagger module of this build.
  cc -shared -fPIC -o "$tmp/needy/libstagger-cuda.so" "$tmp/absent.c"
  expect 1 "was built for another program, not for this stagger" \
    env STAGGER_MODULE_DIR="$tmp/needy" $STAGGER run --model $M --backend cuda --steps 1
fi

# An installed tree finds its own modules (relative to the program).
if command -v cmake >/dev/null && [ -f "$BUILD/cmake_install.cmake" ]; then
  cmake --install "$BUILD" --prefix "$tmp/inst" >/dev/null
  inst=$(find "$tmp/inst" -name stagger -type f -perm -u+x | head -1)
  [ -n "$inst" ] || fail "no installed stagger"
  mod=$(find "$tmp/inst" -name libstagger-cuda.so | head -1)
  [ -n "$mod" ] || fail "the cuda module was not installed"
  G_MESSAGES_DEBUG=all "$inst" run --model $M --steps 1 >"$tmp/err" 2>&1 || fail "installed run failed"
  grep -q "loaded $mod (beside the installed program)" "$tmp/err" ||
    { cat "$tmp/err" >&2; fail "the installed program did not load the installed module"; }
  libs=$(gpu_libs "$inst" --version)
  [ -z "$libs" ] || fail "the installed stagger --version loads $libs"
fi
echo "modules: ok"
