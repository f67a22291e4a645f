#!/usr/bin/env bash
# astra_build.sh: builds ASTRA-sim's analytical backend, at the pin
# docs/INTEROP.md names, on Debian 12, out of its source tree
# (docs/INTEROP.md, "Building ASTRA-sim").
#
#   scripts/astra_build.sh SRC [BUILD]
#
#   SRC    a checkout of github.com/astra-sim/astra-sim at 4b6e027 with the
#          submodules the analytical backend needs (graph_frontend/chakra,
#          network_backend/analytical, remote_memory_backend/analytical,
#          helper/fmt, helper/spdlog); changed in place as below
#   BUILD  the build folder (default: SRC/build/astra_analytical/build)
#
# The local changes (each idempotent, each said when made):
#  1. CMakeLists.txt links three abseil 2024.01 libraries by absolute path
#     under /usr/local (ASTRA-sim's Docker image builds protobuf and abseil
#     from source); Debian's protobuf 3.21 needs no abseil: the lines go.
#  2. Workload.hh and CustomAlgorithm.hh name Chakra::ETFeeder, which the
#     pinned Chakra (f37c2bb) declares inside Chakra::FeederV3 only: they
#     name Chakra::FeederV3::ETFeeder.
#  3. Workload.cc stores a PyTorch process group in `comm_group[pgName]`, a
#     member the class lacks (fixed upstream in 7e526fb, "fix pg_torch comm
#     group"): `comm_groups[std::stoi(pgName)]`, as that fix does.
#  4. When the network backend's yaml-cpp submodule is empty, Debian's
#     libyaml-cpp-dev (0.7) stands for it (an imported target).
# Then Chakra's et_def.proto is compiled with Debian's protoc (it must match
# the libprotobuf it links) and both binaries are built:
#   BUILD/bin/AstraSim_Analytical_Congestion_Unaware (any number of dimensions)
#   BUILD/bin/AstraSim_Analytical_Congestion_Aware   (one dimension)
# Packages: cmake g++ protobuf-compiler libprotobuf-dev libyaml-cpp-dev.
# PROTOBUF_PREFIX / YAML_CPP_PREFIX point at other installs (a usr/ folder
# unpacked from the .deb files, say); JOBS sets make's -j (default 1).
set -euo pipefail
die() { echo "astra_build.sh: $*" >&2; exit 2; }
[ $# -ge 1 ] || die "usage: scripts/astra_build.sh SRC [BUILD]"
SRC=$(cd "$1" && pwd)
BUILD=${2:-$SRC/build/astra_analytical/build}
PB=${PROTOBUF_PREFIX:-/usr}
YAML=${YAML_CPP_PREFIX:-/usr}
LIB=lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)

[ -f "$SRC/astra-sim/workload/Workload.hh" ] || die "$SRC is not an ASTRA-sim checkout"
for sub in graph_frontend/chakra/schema/protobuf network_backend/analytical/congestion_unaware \
           remote_memory_backend/analytical helper/fmt/include helper/spdlog/include; do
  [ -e "$SRC/extern/$sub" ] || die "submodule extern/${sub%%/*}/... missing: git submodule update --init extern/$sub"
done
[ -f "$PB/include/google/protobuf/message.h" ] || die "no protobuf headers under $PB/include (libprotobuf-dev)"
command -v protoc >/dev/null || die "no protoc (protobuf-compiler)"

# 1. abseil by absolute path
if grep -q "/usr/local/lib/libabsl_" "$SRC/CMakeLists.txt"; then
  echo "astra_build.sh: CMakeLists.txt: dropping the /usr/local abseil libraries (Debian's protobuf 3.21 needs none)"
  sed -i '/target_link_libraries(AstraSim PUBLIC \/usr\/local\/lib\/libabsl_/d' "$SRC/CMakeLists.txt"
fi
# 2. Chakra::ETFeeder
for f in astra-sim/workload/Workload.hh astra-sim/system/astraccl/custom_collectives/CustomAlgorithm.hh; do
  if grep -q "Chakra::ETFeeder\*" "$SRC/$f"; then
    echo "astra_build.sh: $f: Chakra::ETFeeder -> Chakra::FeederV3::ETFeeder"
    sed -i 's/Chakra::ETFeeder\*/Chakra::FeederV3::ETFeeder*/' "$SRC/$f"
  fi
done
# 3. comm_group
if grep -q "this->comm_group\[pgName\] = cg;" "$SRC/astra-sim/workload/Workload.cc"; then
  echo "astra_build.sh: Workload.cc: comm_group[pgName] -> comm_groups[std::stoi(pgName)] (upstream 7e526fb)"
  sed -i 's/this->comm_group\[pgName\] = cg;/this->comm_groups[std::stoi(pgName)] = cg;/' "$SRC/astra-sim/workload/Workload.cc"
fi
# 4. yaml-cpp
net=$SRC/extern/network_backend/analytical
if [ ! -f "$net/extern/yaml-cpp/CMakeLists.txt" ] && grep -q "add_subdirectory(.*yaml-cpp" "$net/CMakeLists.txt"; then
  so=$(ls "$YAML/$LIB"/libyaml-cpp.so.0.* 2>/dev/null | head -1)
  [ -n "$so" ] && [ -f "$YAML/include/yaml-cpp/yaml.h" ] || die "no yaml-cpp: its submodule is empty and $YAML has no libyaml-cpp-dev"
  echo "astra_build.sh: network backend: yaml-cpp submodule empty, using $so"
  sed -i "s|add_subdirectory(\${CMAKE_CURRENT_SOURCE_DIR}/extern/yaml-cpp yaml-cpp)|add_library(yaml-cpp SHARED IMPORTED)\nset_target_properties(yaml-cpp PROPERTIES IMPORTED_LOCATION $so INTERFACE_INCLUDE_DIRECTORIES $YAML/include)|" "$net/CMakeLists.txt"
fi

proto=$SRC/extern/graph_frontend/chakra/schema/protobuf
protoc et_def.proto --proto_path="$proto" --cpp_out="$proto"
pblib=$(ls "$PB/$LIB"/libprotobuf.so "/usr/$LIB"/libprotobuf.so.32 2>/dev/null | head -1)
mkdir -p "$BUILD"
cmake -S "$SRC/build/astra_analytical" -B "$BUILD" -DBUILDTARGET=all -DCMAKE_BUILD_TYPE=Release \
  -DProtobuf_INCLUDE_DIR="$PB/include" -DProtobuf_LIBRARY="$pblib" \
  -DProtobuf_PROTOC_EXECUTABLE="$(command -v protoc)" >"$BUILD/cmake.log"
make -C "$BUILD" -j"${JOBS:-1}"
ls -l "$BUILD"/bin/AstraSim_Analytical_Congestion_*
