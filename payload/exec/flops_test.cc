#include "payload/exec/flops.h"

#include <cstdio>

#include <torch/torch.h>

#include "common/files.h"
#include "common/metric_names.h"
#include "common/run_config.h"
#include "payload/exec/flops_ranges.h"
#include "payload/exec/flops_test_run.h"  // after LibTorch: it includes Catch
#include "payload/exec/model.h"
#include "payload/exec/model_testing.h"
#include "payload/exec/test_util.h"
#include "payload/measure/gpu_presence.h"
#include "payload/measure/range_marker.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

// Records Push/Pop calls as "+name" / "-".
struct Recorder : measure::RangeMarker {
  std::vector<std::string> log;
  void Push(const std::string& n) override { log.push_back("+" + n); }
  void Pop() override { log.push_back("-"); }
};

TEST_CASE("flops: MarkRange opens the range around forward and again around backward") {
  Recorder rec;
  torch::Tensor w = torch::ones({3}, torch::requires_grad());
  measure::SetActiveMarker(&rec);
  torch::Tensor y = MarkRange("attention", w, [](const torch::Tensor& in) { return in * 2; });
  rec.log.push_back("|");
  y.sum().backward();
  measure::SetActiveMarker(nullptr);
  const std::vector<std::string> expected = {"+attention", "-", "|", "+attention", "-"};
  CHECK(rec.log == expected);
  CHECK(torch::allclose(w.grad(), torch::full({3}, 2.0)));
  // Without a marker it is the plain function: no nodes, same values.
  torch::Tensor z = MarkRange("attention", w, [](const torch::Tensor& in) { return in * 3; });
  CHECK(torch::allclose(z, w * 3));
}

TEST_CASE("flops: every attention layer of the model opens one range, per layer on request") {
  const ModelConfig c = testing::TinyModelConfig(3, 2, 16, 8, 11);
  torch::manual_seed(0);
  Gpt model(c);
  torch::Tensor x = torch::randint(0, 11, {2, 8}, torch::kLong);
  Recorder rec;
  measure::SetActiveMarker(&rec);
  ResetAttentionLayers();
  model->Loss(x, x).backward();
  SetPerLayerAttentionRanges(true);
  ResetAttentionLayers();
  rec.log.push_back("|");
  {
    torch::NoGradGuard g;
    (void)model->Loss(x, x);
  }
  SetPerLayerAttentionRanges(false);
  measure::SetActiveMarker(nullptr);
  int opened = 0, closed = 0, attention = 0, proj = 0;
  size_t bar = 0;
  for (size_t i = 0; i < rec.log.size(); ++i) {
    if (rec.log[i] == "|") bar = i;
    if (bar != 0) continue;
    (rec.log[i] == "-" ? closed : opened) += 1;
    attention += rec.log[i] == "+attention";
    proj += rec.log[i] == "+proj";
  }
  CHECK(attention == 6);  // 3 layers, forward and backward
  CHECK(proj ==
        24);  // inside each: the q, k, v and output projections (payload/measure/range_paths.h)
  CHECK(opened == 30);
  CHECK(closed == 30);
  std::vector<std::string> per_layer(rec.log.begin() + long(bar) + 1, rec.log.end());
  std::vector<std::string> expected;
  for (const char* layer : {"+L0", "+L1", "+L2"}) {
    expected.insert(expected.end(), {"+attention", layer});
    for (int p = 0; p < 4; ++p) expected.insert(expected.end(), {"+proj", "-"});
    expected.insert(expected.end(), {"-", "-"});
  }
  CHECK(per_layer == expected);
}

TEST_CASE("flops: on a machine without a GPU the kind runs and reports FLOPs as unmeasured") {
  Json config = {{"kind", "flops"},
                 {"seed", 1},
                 {"model", {{"layers", 1}, {"heads", 2}, {"width", 32}, {"context", 32}}},
                 {"train", {{"threads", 1}, {"batch_size", 2}, {"device", "cpu"}}},
                 {"flops", {{"warmup", 1}, {"repeats", 3}}}};
  testing::FlopsEvents ev = testing::RunFlopsForTest(config, "headlab_exec_flops");
  Json summary = ev.summary, provenance = ev.provenance, artifact = ev.artifact;
  CHECK(provenance[metric::kFlopsStatus] == "unmeasured");
  CHECK(provenance["attention_paths"] == Json::parse(R"({"dense_reference": [0]})"));
  const std::string reason = provenance[metric::kFlopsReason].get<std::string>();
  CHECK(reason.rfind("no GPU: ", 0) == 0);
  if (!measure::NoGpuReason().empty()) CHECK(reason == measure::NoGpuReason());
  CHECK_FALSE(summary.contains(metric::kFlopsTotal));
  CHECK_FALSE(summary.contains(metric::kFlopsAttention));
  CHECK(summary[metric::kTimeWallPairMs].get<double>() > 0);
  REQUIRE(artifact["kind"] == "flops");
  StatusOr<std::string> text = ReadFile(artifact["path"].get<std::string>());
  REQUIRE(text.ok());
  Json report = Json::parse(text.value());
  CHECK(report["flops"]["status"] == "unmeasured");
  CHECK(report["flops"]["reason"] == reason);
  CHECK(report["repeats"] == 3);
  testing::RemoveTree(ev.dir);
}

TEST_CASE("flops: an unknown tensor metric set is refused by the run config") {
  Json config = {{"kind", "flops"}, {"flops", {{"tensor_metrics", "guess"}}}};
  CHECK_FALSE(NormalizeRunConfig(config, "test").ok());
}

}  // namespace
}  // namespace headlab
