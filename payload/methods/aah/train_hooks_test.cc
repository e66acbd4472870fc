// AAH's training-loop hooks through the real loop (RunTraining) on a tiny CPU model.

#include <cstdio>
#include <map>
#include <sstream>

#include "common/files.h"
#include "common/metric_names.h"
#include "common/run_config.h"
#include "common/sha256.h"
#include "payload/exec/method_hooks.h"
#include "payload/exec/test_util.h"
#include "payload/exec/train.h"
#include "payload/exec/train_testing.h"
#include "payload/methods/aah/aah_metrics.h"
#include "payload/methods/aah/aah_report.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

// 2 layers x 4 heads, context 32 (windows 4, 8, 16, 32), control every 2 steps.
TrainRequest AahRun(const std::string& name, const Json& overrides) {
  const Json aah = {{"aah", {{"control_every", 2}, {"observe_rows", 2}}}};
  return testing::TinyRunRequest(7, {aah, overrides}, "headlab_aah_hooks_" + name);
}

using Events = testing::TrainEvents;
constexpr auto Run = testing::CollectTrainingEventsOk;

// The aah_head_maps artifact's rows, after checking its SHA-256.
Json HeadMaps(const Events& ev) {
  REQUIRE(ev.by_kind.count("aah_head_maps"));
  const Json& a = ev.by_kind.at("aah_head_maps").back();
  StatusOr<std::string> text = ReadFile(a["path"].get<std::string>());
  REQUIRE(text.ok());
  CHECK(Sha256Hex(text.value()) == a["sha256"]);
  return Json::parse(text.value())["head_maps"];
}

double MeanWindowOverT(const Json& rows, double T) {
  double sum = 0;
  for (const Json& r : rows) sum += r["window"].get<double>();
  return sum / double(rows.size()) / T;
}

}  // namespace

TEST_CASE("aah hooks: the loop runs the controller and reports ACR, coverage, buckets, backend") {
  Events full = Run(AahRun("full", {{"aah", {{"regime", "full"}}}}));
  CHECK(full.summary[metric::kAahAttnRatio] == 1.0);
  CHECK(full.summary[metric::kAahAcr] == 1.0);
  CHECK(full.summary[metric::kAahExactCoverage] == 1.0);
  CHECK(full.summary[metric::kAahBucketPrefix + std::string("32")] == 1.0);
  CHECK(full.summary["aah.backend.dense_masked"] == 1.0);
  CHECK_FALSE(full.summary.contains(metric::kAahNativeFrac));  // no local heads
  CHECK(full.provenance["aah_regime"] == "full");
  CHECK(full.provenance["aah_backend"] == "dense_masked");
  CHECK(full.provenance["aah_backend_fallback"] == Json::array());
  CHECK(HeadMaps(full).size() == 8);

  Events adaptive = Run(AahRun("adaptive", {{"aah", {{"regime", "full_adaptive"}}}}));
  const Json rows = HeadMaps(adaptive);
  REQUIRE(rows.size() == 8);
  const double acr = adaptive.summary[metric::kAahAcr].get<double>();
  CHECK(acr <= 1.0);
  CHECK(acr == Approx(MeanWindowOverT(rows, 32)));
  CHECK(adaptive.summary[metric::kAahAttnRatio].get<double>() == Approx(acr));
  CHECK(adaptive.summary[metric::kAahControlUpdates] == 3.0);  // before steps 0, 2, 4
  // The controller's time: none without control updates, some with them, cumulative in rows.
  CHECK(full.summary[metric::kAahControllerS] == 0.0);
  CHECK(adaptive.summary[metric::kAahControllerS].get<double>() > 0.0);
  CHECK(adaptive.metrics[metric::kAahControllerS].at(1) <=
        adaptive.metrics[metric::kAahControllerS].at(6));
  CHECK(adaptive.metrics[metric::kAahControlUpdates].at(1) == 1.0);
  CHECK(adaptive.metrics[metric::kAahAcr].at(6) == Approx(acr));  // the final evaluation row
  double buckets = 0;
  for (int W : {4, 8, 16, 32})
    buckets += adaptive.summary[metric::kAahBucketPrefix + std::to_string(W)].get<double>();
  CHECK(buckets == Approx(1.0));
  if (acr < 1.0) {  // dense masks run the local heads: none natively, none as a fallback
    CHECK(adaptive.summary[metric::kAahNativeFrac] == 0.0);
    CHECK(adaptive.summary[metric::kAahFallbackFrac] == 0.0);
  }
  // ACR is never FLOPs.
  for (auto& [k, v] : adaptive.summary.items()) CHECK(k.rfind("flops.", 0) != 0);
  testing::RemoveTree(testing::ScratchPath("headlab_aah_hooks_full"));
  testing::RemoveTree(testing::ScratchPath("headlab_aah_hooks_adaptive"));
}

TEST_CASE("aah hooks: a resumed run reproduces the same windows") {
  TrainRequest whole = AahRun("whole", {{"aah", {{"regime", "deep_reuse"}}}});
  Events a = Run(whole);
  REQUIRE(a.checkpoints.size() == 2);  // steps 3 and 6
  REQUIRE(a.checkpoints[0]["step"] == 3);

  TrainRequest resumed = AahRun("resumed", {{"aah", {{"regime", "deep_reuse"}}}});
  resumed.resume = ResumePoint{a.checkpoints[0]["path"], a.checkpoints[0]["sha256"], 3};
  Events b = Run(resumed);
  CHECK(b.provenance["resumed_from_step"] == 3);
  // The controller's state came back: the same update count, windows every step, final
  // head maps and training losses.
  for (int64_t step = 4; step <= 6; ++step) {
    INFO("step " << step);
    CHECK(b.metrics[metric::kAahControlUpdates].at(step) ==
          a.metrics[metric::kAahControlUpdates].at(step));
    CHECK(b.metrics[metric::kAahAttnRatio].at(step) == a.metrics[metric::kAahAttnRatio].at(step));
    CHECK(b.metrics[metric::kTrainLoss].at(step) == a.metrics[metric::kTrainLoss].at(step));
  }
  CHECK(HeadMaps(b) == HeadMaps(a));
  CHECK(b.summary[metric::kAahAcr] == a.summary[metric::kAahAcr]);
  testing::RemoveTree(whole.out_dir);
  testing::RemoveTree(resumed.out_dir);
}

TEST_CASE("aah hooks: a bad aah section is refused before training, naming the field") {
  Json config = {{"model", {{"layers", 1}, {"heads", 2}, {"width", 32}, {"context", 32}}},
                 {"aah", {{"regime", "shallow_freeze"}, {"hierarchy", "2,x"}}}};
  StatusOr<Json> normalized = NormalizeRunConfig(config, "test");
  REQUIRE(normalized.ok());
  StatusOr<ExecConfig> c = ExecConfigFromJson(normalized.value(), "test");
  REQUIRE(c.ok());
  StatusOr<HookList> hooks = MakeMethodHooks(c.value(), normalized.value(), "m.json");
  REQUIRE_FALSE(hooks.ok());
  CHECK(hooks.status().code() == Status::Code::kInvalidArgument);
  CHECK(hooks.status().message().find("m.json: $.config.aah.hierarchy") == 0);

  // Regime off: no hooks at all.
  config["aah"] = {{"regime", "off"}};
  normalized = NormalizeRunConfig(config, "test");
  REQUIRE(normalized.ok());
  hooks = MakeMethodHooks(c.value(), normalized.value(), "m.json");
  REQUIRE(hooks.ok());
  CHECK(hooks->empty());
}

TEST_CASE("aah hooks: backend summary counts native and fallback local buckets") {
  aah::ExecutionBackend fused{aah::kFusedCuda, "cuda:0", {"", "head_dim 32 unsupported"}, ""};
  const aah::WindowMap w = {{4, 8, 32, 32}, {4, 16, 16, 32}};
  Json v = aah::BackendSummary(fused, w, 32);
  CHECK(v["aah.backend.fused_cuda"] == 1.0);
  CHECK(v[metric::kAahNativeFrac] == Approx(2.0 / 5.0));
  CHECK(v[metric::kAahFallbackFrac] == Approx(3.0 / 5.0));
  CHECK(v["aah.fallback.4"] == Approx(0.5));
  CHECK(v["aah.fallback.8"] == 0.0);
  CHECK(v["aah.fallback.16"] == 1.0);
  CHECK_FALSE(v.contains("aah.fallback.32"));  // ordinary heads are not a local bucket
  Json p = aah::BackendProvenance(fused);
  CHECK(p["aah_backend_fallback"] == Json::array({"layer 1: head_dim 32 unsupported"}));

  aah::ExecutionBackend dense{aah::kDenseMasked, "cpu", {}, ""};
  v = aah::BackendSummary(dense, w, 32);
  CHECK(v["aah.backend.dense_masked"] == 1.0);
  CHECK(v[metric::kAahNativeFrac] == 0.0);
  CHECK(v[metric::kAahFallbackFrac] == 0.0);
  CHECK_FALSE(v.contains("aah.fallback.4"));
}

}  // namespace headlab
