// The flops run kind on the device machine (ctest label gpu; built only in a CUDA LibTorch
// build of the whole repo): a tiny GPT's forward and training step are counted, timed and
// traced, and the counts agree with the model's shape.

#include <cstdio>

#include "common/files.h"
#include "common/metric_names.h"
#include "common/run_config.h"
#include "payload/exec/flops.h"
#include "payload/exec/flops_test_run.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

TEST_CASE("flops kind on CUDA: measured step and forward FLOPs, times and kernels") {
  const int64_t L = 2, w = 128, T = 128, V = 256, B = 4;
  Json config = {
      {"kind", "flops"},
      {"seed", 1},
      {"model", {{"layers", L}, {"heads", 4}, {"width", w}, {"context", T}, {"vocab", V}}},
      {"train", {{"batch_size", B}, {"device", "cuda"}}},
      {"flops", {{"warmup", 2}, {"repeats", 3}, {"per_layer", 1}}}};
  testing::FlopsEvents ev = testing::RunFlopsForTest(config, "headlab_flops_gpu");
  Json summary = ev.summary, provenance = ev.provenance, artifact = ev.artifact;
  INFO(summary.dump(2));
  INFO(provenance.dump(2));
  REQUIRE(provenance[metric::kFlopsStatus] == "measured");
  const double step = summary[metric::kFlopsTotal], fwd = summary[metric::kFlopsForwardTotal];
  const double attention = summary[metric::kFlopsAttention];
  // Forward matmuls alone: 2 * tokens * (12 L w^2 + w V) (QKV, O, 4x MLP, LM head).
  const double matmul = 2.0 * B * T * (12.0 * L * w * w + double(w) * V);
  CHECK(fwd >= 0.9 * matmul);
  CHECK(fwd <= 4.0 * matmul);
  CHECK(step > 2.0 * fwd);  // backward costs about twice the forward
  CHECK(attention > 0);
  CHECK(attention < step);
  CHECK(summary[metric::kFlopsForwardAttention].get<double>() > 0);
  CHECK(summary[metric::kFlopsPasses].get<double>() >= 1);
  CHECK(summary[metric::kTimeStepMs].get<double>() > 0);
  CHECK(summary[metric::kKernelStepMs].get<double>() > 0);
  CHECK(summary[metric::kKernelAttentionMs].get<double>() > 0);
  CHECK(summary[metric::kBenchPeakMemBytes].get<double>() > 0);
  StatusOr<std::string> text = ReadFile(artifact["path"].get<std::string>());
  REQUIRE(text.ok());
  Json report = Json::parse(text.value());
  CHECK(report["flops"]["dropped_ranges"] == 0);
  CHECK(report["flops"]["ranges"].contains("step/backward/attention/L1"));
  CHECK(report["kernels"]["step/forward/attention"]["kernels"].get<int64_t>() > 0);
  std::printf("%s\n", report.dump(2).c_str());
  testing::RemoveTree(ev.dir);
}

}  // namespace
}  // namespace headlab
