#!/usr/bin/env bash
# gpu_check.sh: builds the AoH library (worker/methods/aoh + worker/exec + the common sources
# they use) and headlab_aoh_test against the device machine's LibTorch (2.x, CUDA), runs
# the tests (CPU tensors: the LibTorch 2.x build check), then on CUDA: decode-vs-forward
# equality for full attention and AoH labels, and the Table 11 columns (prefill latency,
# decode ms/token, KV bytes) for full attention and AoH at sparsity 0.5 / 0.75 on a
# randomly initialised 12-layer RoPE/GQA model (latency and memory do not depend on the
# weights). fp32 dense reference attention (eager, no fused kernel): label, not a claim
# about fused kernels.
# Run from the repository root on the device machine (the `run` tool) with carry
# ["build-aoh/dev-include"] (Debian's nlohmann/ and catch2/ headers). Output in $OUT.
set -uo pipefail
repo="$PWD"
out="${OUT:-$repo/gpu-out}"
build=/tmp/headlab-aoh-gpu
mkdir -p "$out" "$build"
export PATH="/opt/torch/.venv/bin:/usr/local/cuda/bin:$PATH"
torch_cmake="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')"
cat > "$build/bench.cc" <<'CC'
#include <cstdio>
#include <iostream>
#include <torch/version.h>
#include "worker/methods/aoh/aoh_eval.h"
#include "worker/methods/aoh/aoh_model.h"
using namespace headlab;
int main(int argc, char** argv) {
  torch::Device dev(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);
  ModelConfig c;
  c.layers = 12; c.heads = 12; c.kv_heads = 4; c.width = 768; c.context = 4096;
  c.mlp_ratio = 4; c.vocab = 256; c.pos = "rope"; c.rope_base = 10000; c.norm = "rmsnorm";
  torch::manual_seed(1);
  Gpt model(c);
  model->to(dev);
  model->eval();
  torch::NoGradGuard no_grad;
  Json report = Json::object();
  report["device"] = aoh::DeviceLabel(dev);
  report["torch"] = TORCH_VERSION;
  // Decode equals the full forward on this device (full attention and AoH labels).
  torch::Tensor idx = torch::randint(0, 256, {2, 300}, torch::kLong).to(dev);
  for (double s : {0.0, 0.5}) {
    aoh::AohOptions o; o.sparsity = s; o.sink = 16; o.recent = 64;
    auto plan = aoh::PlanAoh(*model, o);
    aoh::ApplyPlan(*model, plan.value());
    torch::Tensor full = model->forward(idx);
    aoh::DecoderOptions d; d.prefill_chunk = 37;
    auto dec = aoh::AohDecoder::Create(model.get(), d);
    torch::Tensor pre = dec.value()->Prefill(idx.narrow(1, 0, 250));
    std::vector<torch::Tensor> steps;
    for (int64_t t = 250; t < 300; ++t) steps.push_back(dec.value()->Step(idx.select(1, t)));
    torch::Tensor mine = torch::cat({pre, torch::stack(steps, 1)}, 1);
    report["max_abs_diff_sparsity_" + std::to_string(s)] = (mine - full).abs().max().item<double>();
  }
  aoh::BenchOptions b;
  b.contexts = {4096, 8192, 16384, 32768};
  b.decode_tokens = 32;
  b.repeats = 3;
  for (double s : {0.0, 0.5, 0.75}) {
    aoh::AohOptions o; o.sparsity = s;  // paper defaults: sink 128, recent 256
    aoh::ApplyPlan(*model, aoh::PlanAoh(*model, o).value());
    aoh::DecoderOptions d;  // prefill chunk 512
    auto rows = aoh::BenchmarkLatency(*model, d, b);
    if (!rows.ok()) { std::cerr << rows.status().ToString() << "\n"; return 1; }
    report[s == 0 ? "full" : "aoh_sparsity_" + std::to_string(s)] = aoh::BenchJson(rows.value());
    std::cout << report.dump() << std::endl;  // partial results survive a timeout
  }
  std::cout << report.dump(2) << std::endl;
  return 0;
}
CC
cat > "$build/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.22)
project(aoh_gpu CXX)
set(CMAKE_CXX_STANDARD 17)
find_package(Torch REQUIRED)
file(GLOB srcs $repo/worker/exec/*.cc $repo/worker/methods/aoh/*.cc)
file(GLOB tests $repo/worker/exec/*_test.cc $repo/worker/methods/aoh/*_test.cc)
list(REMOVE_ITEM srcs \${tests})
foreach(f files json log sha256 status run_config)
  list(APPEND srcs $repo/common/\${f}.cc)
endforeach()
add_library(aoh_lib STATIC \${srcs})
target_include_directories(aoh_lib PUBLIC $repo $repo/build-aoh/dev-include)
target_link_libraries(aoh_lib PUBLIC \${TORCH_LIBRARIES})
add_executable(aoh_bench $build/bench.cc)
target_link_libraries(aoh_bench aoh_lib)
file(GLOB aoh_tests $repo/worker/methods/aoh/*_test.cc)
add_executable(aoh_tests \${aoh_tests} $repo/common/testing/catch_main.cc)
target_link_libraries(aoh_tests aoh_lib)
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
echo "build ok: torch $(python3 -c 'import torch; print(torch.__version__)')"
status=0
(cd /tmp && "$build/b/aoh_tests") > "$out/tests.log" 2>&1 || status=1
tail -3 "$out/tests.log"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader > "$out/gpu.txt" 2>&1
"$build/b/aoh_bench" > "$out/bench.json" 2> "$out/bench.stderr" || status=1
tail -c 3000 "$out/bench.json"
exit $status
