#!/usr/bin/env bash
# gpu_smoke.sh: builds `headlab exec` alone (payload/exec + the common sources it uses) and
# its unit tests against the device machine's LibTorch (2.x, CUDA), runs the tests, then a
# demo-shaped training run on CUDA and on CPU. Run from the repository root on the device
# machine (through the `run` tool) with carry ["build-exec/dev-include"], a folder holding
# Debian's nlohmann/ and catch2/catch.hpp headers (cp -r /usr/include/{nlohmann,catch2}).
# Logs go to $OUT (or ./gpu-out).
set -uo pipefail
repo="$PWD"
out="${OUT:-$repo/gpu-out}"
build=/tmp/headlab-exec-smoke
mkdir -p "$out" "$build"
export PATH="/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH"
torch_cmake="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')"
cat > "$build/main.cc" <<'CC'
#include "payload/exec/exec_main.h"
int main(int argc, char** argv) { return headlab::ExecMain(argc - 1, argv + 1); }
CC
cat > "$build/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.22)
project(exec_smoke CXX)
set(CMAKE_CXX_STANDARD 17)
find_package(Torch REQUIRED)
file(GLOB srcs $repo/payload/exec/*.cc)
file(GLOB tests $repo/payload/exec/*_test.cc)
list(REMOVE_ITEM srcs \${tests})
foreach(f files json log sha256 status run_config)
  list(APPEND srcs $repo/common/\${f}.cc)
endforeach()
add_library(exec_lib STATIC \${srcs})
target_include_directories(exec_lib PUBLIC $repo $repo/build-exec/dev-include)
target_link_libraries(exec_lib PUBLIC \${TORCH_LIBRARIES})
add_executable(exec_smoke $build/main.cc)
target_link_libraries(exec_smoke exec_lib)
add_executable(exec_tests \${tests} $repo/common/testing/catch_main.cc)
target_link_libraries(exec_tests exec_lib)
CMAKE
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
if ! { cmake -S "$build" -B "$build/b" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
         -DCMAKE_PREFIX_PATH="$torch_cmake" && cmake --build "$build/b" -j "$(nproc)"; } \
       > "$out/build.log" 2>&1; then
  grep -E "error|Error" "$out/build.log" | head -30
  echo "BUILD FAILED"
  exit 1
fi
echo "build ok: $(python3 -c 'import torch; print(torch.__version__)')"
status=0
(cd /tmp && "$build/b/exec_tests") > "$out/tests.log" 2>&1 || status=1
tail -3 "$out/tests.log"
for device in cuda cpu; do
  dir="/tmp/exec-smoke-$device"
  rm -rf "$dir"
  mkdir -p "$dir"
  cat > "$dir/manifest.json" <<JSON
{"run": 1, "attempt": 0, "out_dir": "$dir/out",
 "config": {"seed": 1, "train": {"steps": 200, "device": "$device", "threads": 1}}}
JSON
  "$build/b/exec_smoke" exec "$dir/manifest.json" > "$out/events-$device.jsonl" 2> "$out/stderr-$device.txt"
  echo "$device: exit $?"
  grep -E "provenance|summary" "$out/events-$device.jsonl"
done
exit $status
