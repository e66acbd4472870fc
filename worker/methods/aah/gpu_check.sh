#!/usr/bin/env bash
# gpu_check.sh: builds the AAH library (worker/methods/aah) with worker/exec and the common
# sources it needs against the device machine's LibTorch (2.x), runs headlab_aah_test's
# sources there (CPU tensors). Checks the "must also build with LibTorch 2.x" rule.
# Run from the repository root on the device machine with carry ["build-aah/dev-include"]
# (Debian's nlohmann/ and catch2/ headers: cp -r /usr/include/{nlohmann,catch2}).
set -uo pipefail
repo="$PWD"
out="${OUT:-$repo/gpu-out}"
build=/tmp/headlab-aah-check
mkdir -p "$out" "$build"
export PATH="/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH"
torch_cmake="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')"
cat > "$build/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.22)
project(aah_check CXX)
set(CMAKE_CXX_STANDARD 17)
find_package(Torch REQUIRED)
file(GLOB srcs $repo/worker/exec/*.cc $repo/worker/methods/aah/*.cc)
file(GLOB tests $repo/worker/exec/*_test.cc $repo/worker/methods/aah/*_test.cc)
list(REMOVE_ITEM srcs \${tests})
file(GLOB aah_tests $repo/worker/methods/aah/*_test.cc)
foreach(f files json log sha256 status run_config)
  list(APPEND srcs $repo/common/\${f}.cc)
endforeach()
add_library(aah_lib STATIC \${srcs})
target_include_directories(aah_lib PUBLIC $repo $repo/build-aah/dev-include)
target_link_libraries(aah_lib PUBLIC \${TORCH_LIBRARIES})
add_executable(aah_tests \${aah_tests} $repo/common/testing/catch_main.cc)
target_link_libraries(aah_tests aah_lib)
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
echo "build ok: LibTorch $(python3 -c 'import torch; print(torch.__version__)')"
(cd /tmp && "$build/b/aah_tests" --durations yes) > "$out/tests.log" 2>&1
status=$?
tail -3 "$out/tests.log"
exit $status
