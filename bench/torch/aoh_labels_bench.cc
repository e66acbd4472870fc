// aoh_labels_bench: how long AoH's data-free labelling (AoH §4) takes at a pretrained
// family's shape. For every layer of the preset (default llama3.1-8b: 32 layers, 32 query /
// 8 KV heads of 128, width 4096) it draws random bf16 q_proj and k_proj weights (as a bf16
// checkpoint holds them; not timed), then times what PlanAoh does with them: every query
// head's effective rank of M_h = W_K^T W_Q from d_head x d_head factors of the Gram
// matrices (kernel_spectrum.h LayerScores: one batched GEMM and eigensolve for a layer's
// query heads, one for its KV groups: GQA-aware), the GQA group aggregation and the
// retrieval/streaming labels (AoH Table 5, §4). Prints seconds with the device and thread count.
// Runs on the CPU unless
// --device cuda.
//
//   aoh_labels_bench [--preset NAME] [--rope-max-distance D] [--device cpu|cuda] [--threads N]
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "common/flags.h"
#include "common/run_config.h"
#include "payload/exec/exec_config.h"
#include "payload/methods/aoh/head_labels.h"
#include "payload/methods/aoh/kernel_spectrum.h"

namespace headlab::aoh {
namespace {

int Main(int argc, char** argv) {
  FlagsSpec spec;
  spec.program = "aoh_labels_bench";
  spec.options = {
      {"--preset", "", "NAME", "model.preset whose shape is labelled (default llama3.1-8b)"},
      {"--rope-max-distance", "", "D",
       "0: vanilla scores (default); D: RoPE-aware up to D (AoH §6.4)"},
      {"--device", "", "DEV",
       "cpu (default) or cuda: where the weights and the factorisations live"},
      {"--threads", "", "N", "intra-op threads (default: the library's)"},
  };
  std::vector<std::string> args(argv, argv + argc);
  StatusOr<ParsedArgs> flags = ParseFlags(spec, args);
  if (!flags.ok()) {
    std::fprintf(stderr, "%s\n", flags.status().ToString().c_str());
    return 2;
  }
  if (flags->help()) {
    std::printf(
        "usage: aoh_labels_bench [options]\nTimes AoH's effective-rank labelling of every KV "
        "group at a preset's shape on random bf16 weights.\n\n%s",
        FormatOptions(spec.options).c_str());
    return 0;
  }
  const std::string preset = flags->Get("--preset", "llama3.1-8b");
  StatusOr<Json> run = NormalizeRunConfig(Json{{"model", {{"preset", preset}}}}, "--preset");
  if (!run.ok()) {
    std::fprintf(stderr, "aoh_labels_bench: %s\n", run.status().ToString().c_str());
    return 2;
  }
  StatusOr<ExecConfig> exec = ExecConfigFromJson(run.value(), "--preset");
  if (!exec.ok()) {
    std::fprintf(stderr, "aoh_labels_bench: %s\n", exec.status().ToString().c_str());
    return 2;
  }
  const ModelConfig& c = exec->model;
  const int64_t max_distance = std::stoll(flags->Get("--rope-max-distance", "0"));
  const torch::Device device(flags->Get("--device", "cpu"));
  if (flags->Has("--threads")) torch::set_num_threads(std::stoi(flags->Get("--threads")));
  const int64_t d = c.HeadDim();
  torch::manual_seed(1);
  torch::NoGradGuard no_grad;
  double seconds = 0;
  std::vector<std::vector<double>> ranks;
  for (int64_t l = 0; l < c.layers; ++l) {
    // Random bf16 weights with a checkpoint's scale (not timed).
    auto bf16 = torch::dtype(torch::kBFloat16).device(device);
    torch::Tensor wq = (torch::randn({c.heads * d, c.width}) * 0.02).to(bf16);
    torch::Tensor wk = (torch::randn({c.kv_heads * d, c.width}) * 0.02).to(bf16);
    if (device.is_cuda()) torch::cuda::synchronize();
    const auto start = std::chrono::steady_clock::now();
    std::vector<double> layer;
    for (const SpectralScores& s : LayerScores(wq, wk, d, c.Rope(), max_distance))
      layer.push_back(s.effective_rank);
    ranks.push_back(std::move(layer));
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const auto start = std::chrono::steady_clock::now();
  const auto groups = AggregateGroups(ranks, c.kv_heads, GroupAggregation::kMean);
  const auto roles = LabelGroups(groups, Metric::kEffectiveRank, Selection::kAoh, 0.5, 0);
  seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int64_t streaming = 0;
  double mean_rank = 0;
  for (size_t l = 0; l < roles.size(); ++l)
    for (size_t g = 0; g < roles[l].size(); ++g) {
      streaming += roles[l][g] == Role::kStreaming;
      mean_rank += groups[l][g] / double(c.layers * c.kv_heads);
    }
  std::printf(
      "aoh_labels_bench: %s, %lld layers x %lld KV groups (%lld query heads of %lld, width %lld), "
      "rope_max_distance %lld, bf16 weights on %s, %d threads\n",
      preset.c_str(), (long long)c.layers, (long long)c.kv_heads, (long long)c.heads, (long long)d,
      (long long)c.width, (long long)max_distance, device.str().c_str(), torch::get_num_threads());
  std::printf(
      "labelling: %.2f s (%.3f s per layer); %lld of %lld groups streaming at sparsity 0.5; "
      "mean group effective rank %.2f\n",
      seconds, seconds / double(c.layers), (long long)streaming, (long long)(c.layers * c.kv_heads),
      mean_rank);
  return 0;
}

}  // namespace
}  // namespace headlab::aoh

int main(int argc, char** argv) { return headlab::aoh::Main(argc, argv); }
