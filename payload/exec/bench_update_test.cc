#include "payload/exec/bench_update.h"

#include "common/metric_names.h"
#include "payload/exec/bench_model.h"
#include "payload/exec/bench_testing.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
TEST_CASE("bench-update: warm-ups discarded, median of the timed updates, device labelled") {
  Status st;
  testing::BenchEvents ev =
      testing::RunBench(RunBenchUpdate, testing::TinyBench("bench-update", Json::object()), &st);
  REQUIRE(st.ok());
  CHECK(ev.metric_count[metric::kBenchUpdateMs] == 3);  // repeats only, not the warm-up
  const double median = ev.summary[metric::kBenchUpdateMs].get<double>();
  CHECK(median > 0);
  CHECK(ev.summary["bench.update_ms.min"].get<double>() <= median);
  CHECK(median <= ev.summary["bench.update_ms.max"].get<double>());
  CHECK(ev.summary[metric::kBenchPeakMemBytes].get<double>() > 0);
  CHECK(ev.provenance["device"].get<std::string>().rfind("cpu (1 threads)", 0) == 0);
  CHECK(ev.provenance["timer"] == "steady_clock");
  CHECK(ev.provenance["memory_kind"] == "peak_rss");
  CHECK(ev.provenance["precision"] == "fp32");  // train.precision auto on the CPU
  CHECK(ev.provenance["attention"] == "auto");
  CHECK(ev.provenance["attention_paths"].is_object());  // after the first update
}

TEST_CASE("bench legs honour head states: fixed and pruned heads in the timed model") {
  BenchRequest req = testing::TinyBench(
      "bench-update",
      {{"bench", {{"fixed_heads", "0.0,1.*"}}}, {"model", {{"head_modes", "0.1=pruned"}}}});
  auto settings = BenchSettingsFromJson(req.config_json, req.config, "test");
  REQUIRE(settings.ok());
  Gpt model{nullptr};
  REQUIRE(MakeBenchModel(req.config, *settings, torch::Device(torch::kCPU), &model).ok());
  CHECK(model->attention(0)->head_states()[0].mode == HeadMode::kFixed);
  CHECK(model->attention(0)->head_states()[1].mode == HeadMode::kPruned);
  CHECK(model->attention(0)->head_states()[2].mode == HeadMode::kOrdinary);
  for (int h = 0; h < 4; ++h)
    CHECK(model->attention(1)->head_states()[size_t(h)].mode == HeadMode::kFixed);
  Status st;
  testing::RunBench(RunBenchUpdate, req, &st);
  REQUIRE(st.ok());
}

}  // namespace headlab
