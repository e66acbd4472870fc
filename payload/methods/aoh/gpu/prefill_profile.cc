// aoh_prefill_profile: where a chunked prefill's time goes, kernel by kernel, on the device.
// Builds each arm of a bench-decode grid (default experiments/measure/aoh_decode_gpu.jsonc:
// the 124m preset with RoPE, full vs heads 0-5 of every layer streaming with sink 128 and
// recent 256; zero-replacement control arms skipped) as the service's bench leg does
// (MakeBenchModel, DecoderFor: its precision, chunk size and decode path), runs one warm-up
// prefill of LENGTH tokens at batch BATCH and one more without the profiler, then one under
// PyTorch's Kineto profiler, and saves its trace as DIR/prefill-<arm>.json
// (chrome://tracing format). Then, after that prefill, 8 warm decode steps (the bench leg's
// path: each a CUDA graph replay on the graph path) and 32 more under the profiler, traced
// into DIR/decode-<arm>.json. scripts/gpu/trace_summary.py turns a trace into a table of
// kernels and the device's idle time. Built only against a CUDA LibTorch
// (tests/CMakeLists.txt); run from the repository root.
//
//   aoh_prefill_profile DIR [LENGTH [BATCH [GRID]]]      (defaults 16384, 16, the grid above)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "common/files.h"
#include "common/grid.h"
#include "payload/decode/decoder.h"
#include "payload/exec/bench_model.h"
#include "payload/exec/bench_settings.h"
#include "payload/exec/exec_config.h"
#include "payload/methods/aoh/aoh_options.h"
#include "payload/methods/aoh/aoh_report.h"

namespace headlab::aoh {
namespace {

namespace prof = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

double PrefillMs(decode::KvDecoder& d, const torch::Tensor& prompt) {
  d.Reset();
  torch::cuda::synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  d.Prefill(
      prompt, [](int64_t, const torch::Tensor&) {}, /*last_only=*/true);
  torch::cuda::synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Runs `steps` greedy decode steps from *next (the bench leg's), leaving the last token in
// *next; returns the ms per step.
double StepsMs(decode::KvDecoder& d, torch::Tensor* next, int steps) {
  torch::cuda::synchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) *next = d.Step(*next).argmax(-1);
  torch::cuda::synchronize();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
         steps;
}

// Prints `status` (when not ok) and returns whether it was ok.
bool Ok(const Status& status) {
  if (!status.ok()) std::fprintf(stderr, "aoh_prefill_profile: %s\n", status.message().c_str());
  return status.ok();
}

int Main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help") {
    std::fprintf(stderr, "usage: aoh_prefill_profile DIR [LENGTH [BATCH [GRID]]]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int64_t length = argc > 2 ? std::atoll(argv[2]) : 16384,
                batch = argc > 3 ? std::atoll(argv[3]) : 16;
  const std::string grid_file = argc > 4 ? argv[4] : "experiments/measure/aoh_decode_gpu.jsonc";
  if (length < 1 || batch < 1) {
    std::fprintf(stderr, "aoh_prefill_profile: LENGTH and BATCH must be positive integers\n");
    return 2;
  }
  if (!torch::cuda::is_available()) {
    std::fprintf(stderr, "aoh_prefill_profile: no CUDA device\n");
    return 1;
  }
  StatusOr<std::string> text = ReadFile(grid_file);
  if (!Ok(text.status())) return 1;
  StatusOr<Grid> grid = ExpandGrid(text.value(), grid_file, {});
  if (!Ok(grid.status())) return 1;
  torch::NoGradGuard no_grad;
  std::set<std::string> done;
  for (const ExpandedRun& run : grid->runs) {
    if (done.count(run.arm) || run.config["pair"]["control"].get<int64_t>() == 1) continue;
    done.insert(run.arm);
    StatusOr<ExecConfig> exec = ExecConfigFromJson(run.config, grid_file);
    if (!Ok(exec.status())) return 1;
    StatusOr<BenchSettings> settings = BenchSettingsFromJson(run.config, *exec, grid_file);
    if (!Ok(settings.status())) return 1;
    StatusOr<AohRunConfig> aoh = AohRunConfigFromJson(run.config, grid_file);
    if (!Ok(aoh.status())) return 1;
    Gpt model(nullptr);
    if (!Ok(MakeBenchModel(*exec, *settings, torch::Device(torch::kCUDA), &model))) return 1;
    model->eval();
    auto made =
        decode::KvDecoder::Create(model.get(), DecoderFor(*model.get(), *aoh, /*plan=*/nullptr));
    if (!Ok(made.status())) return 1;
    decode::KvDecoder& d = *made.value();
    torch::manual_seed(1);
    const torch::Tensor prompt =
        torch::randint(0, exec->model.vocab, {batch, length}, torch::kLong).to(torch::kCUDA);
    const double warm = PrefillMs(d, prompt);
    const double again = PrefillMs(d, prompt);
    const ProfilerConfig config(ProfilerState::KINETO);
    const std::set<ActivityType> activities{ActivityType::CPU, ActivityType::CUDA};
    prof::prepareProfiler(config, activities);
    prof::enableProfiler(config, activities);
    const double profiled = PrefillMs(d, prompt);
    const std::string path = dir + "/prefill-" + run.arm + ".json";
    prof::disableProfiler()->save(path);
    std::printf(
        "%s: prefill of %lld tokens x %lld: %.1f ms (warm-up), %.1f ms, %.1f ms under the profiler "
        "-> %s\n",
        run.arm.c_str(), (long long)length, (long long)batch, warm, again, profiled, path.c_str());
    // Decode steps after the prefill.
    constexpr int kWarmSteps = 8, kSteps = 32;
    torch::Tensor next = torch::zeros({batch}, torch::dtype(torch::kLong).device(torch::kCUDA));
    StepsMs(d, &next, kWarmSteps);
    const double step_ms = StepsMs(d, &next, kSteps);
    prof::prepareProfiler(config, activities);
    prof::enableProfiler(config, activities);
    const double profiled_step_ms = StepsMs(d, &next, kSteps);
    const std::string decode_path = dir + "/decode-" + run.arm + ".json";
    prof::disableProfiler()->save(decode_path);
    std::printf(
        "%s: %d decode steps at position %lld: %.3f ms a step, %.3f under the profiler -> %s\n",
        run.arm.c_str(), kSteps, (long long)d.position(), step_ms, profiled_step_ms,
        decode_path.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace headlab::aoh

int main(int argc, char** argv) { return headlab::aoh::Main(argc, argv); }
