// aoh_prefill_profile: where a chunked prefill's time goes, kernel by kernel, on the device.
// Builds the shape of experiments/measure/aoh_decode_gpu.jsonc (the 124m preset with RoPE:
// 12 layers, 12 heads of 64, width 768, GELU MLP 4x, vocab 50304; bf16 autocast; chunks of
// 512) once with every head ordinary and once with heads 0-5 of every layer streaming (sink
// 128, recent 256), runs one warm-up prefill of LENGTH tokens at batch BATCH through the
// decoder's graph path (the service's bench-decode path), then one more under PyTorch's
// Kineto profiler, and saves its trace as DIR/prefill-<arm>.json (chrome://tracing format).
// scripts/gpu/trace_summary.py turns a trace into a table of kernels and the device's idle
// time. Built only against a CUDA LibTorch (tests/CMakeLists.txt).
//
//   aoh_prefill_profile DIR [LENGTH [BATCH]]      (defaults 16384, 16)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "payload/exec/model.h"
#include "payload/methods/aoh/streaming_decode.h"

namespace headlab::aoh {
namespace {

namespace prof = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

double PrefillMs(AohDecoder& d, const torch::Tensor& prompt) {
  d.Reset();
  torch::cuda::synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  d.Prefill(prompt, [](int64_t, const torch::Tensor&) {}, /*last_only=*/true);
  torch::cuda::synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int Main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help") {
    std::fprintf(stderr, "usage: aoh_prefill_profile DIR [LENGTH [BATCH]]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int64_t length = argc > 2 ? std::atoll(argv[2]) : 16384, batch = argc > 3 ? std::atoll(argv[3]) : 16;
  if (length < 1 || batch < 1) {
    std::fprintf(stderr, "aoh_prefill_profile: LENGTH and BATCH must be positive integers\n");
    return 2;
  }
  if (!torch::cuda::is_available()) {
    std::fprintf(stderr, "aoh_prefill_profile: no CUDA device\n");
    return 1;
  }
  torch::NoGradGuard no_grad;
  ModelConfig c;
  c.layers = 12;
  c.heads = 12;
  c.kv_heads = 12;
  c.width = 768;
  c.context = 32768;
  c.mlp_ratio = 4;
  c.vocab = 50304;
  c.pos = "rope";
  c.rope_base = 10000;
  c.norm = "layernorm";
  for (const char* arm : {"full", "streaming50"}) {
    torch::manual_seed(1);
    Gpt model(c);
    if (std::string(arm) == "streaming50") {
      HeadState s;
      s.mode = HeadMode::kStreaming;
      s.sink = 128;
      s.recent = 256;
      for (int64_t l = 0; l < c.layers; ++l)
        for (int64_t h = 0; h < 6; ++h) model->attention(l)->SetHeadState(h, s);
    }
    model->to(torch::kCUDA);
    model->eval();
    model->SetPrecision(Precision::kBf16);
    DecoderOptions o;
    o.prefill_chunk = 512;
    auto made = AohDecoder::Create(model.get(), o);
    if (!made.ok()) {
      std::fprintf(stderr, "aoh_prefill_profile: %s\n", made.status().message().c_str());
      return 1;
    }
    AohDecoder& d = *made.value();
    const torch::Tensor prompt = torch::randint(0, c.vocab, {batch, length}, torch::kLong).to(torch::kCUDA);
    const double warm = PrefillMs(d, prompt);
    const double again = PrefillMs(d, prompt);
    const ProfilerConfig config(ProfilerState::KINETO);
    const std::set<ActivityType> activities{ActivityType::CPU, ActivityType::CUDA};
    prof::prepareProfiler(config, activities);
    prof::enableProfiler(config, activities);
    const double profiled = PrefillMs(d, prompt);
    const std::string path = dir + "/prefill-" + arm + ".json";
    prof::disableProfiler()->save(path);
    std::printf("%s: prefill of %lld tokens x %lld: %.1f ms (warm-up), %.1f ms, %.1f ms under the profiler -> %s\n",
                arm, (long long)length, (long long)batch, warm, again, profiled, path.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace headlab::aoh

int main(int argc, char** argv) { return headlab::aoh::Main(argc, argv); }
