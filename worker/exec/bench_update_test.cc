#include "worker/exec/bench_update.h"

#include <catch2/catch.hpp>


#include "common/metric_names.h"
#include "common/run_config.h"
#include "worker/exec/bench_latency.h"
#include "worker/exec/bench_model.h"
#include "worker/exec/test_util.h"
#include "worker/exec/event_capture.h"

namespace headlab {
namespace {

BenchRequest TinyBench(const std::string& kind, const Json& overrides) {
  Json config = {{"kind", kind},
                 {"seed", 2},
                 {"model", {{"layers", 2}, {"heads", 4}, {"width", 32}, {"context", 32},
                            {"pos", "rope"}}},
                 {"train", {{"threads", 1}, {"batch_size", 2}, {"grad_accum", 2}, {"device", "cpu"}}},
                 {"bench", {{"warmup", 1}, {"repeats", 3}}}};
  config.merge_patch(overrides);
  StatusOr<Json> normalized = NormalizeRunConfig(config, "test");
  REQUIRE(normalized.ok());
  StatusOr<ExecConfig> c = ExecConfigFromJson(*normalized, "test");
  REQUIRE(c.ok());
  std::string dir = testing::ScratchPath("headlab_bench_" + kind);
  testing::RemoveTree(dir);
  return BenchRequest{*c, *normalized, "test", dir};
}

struct Events {
  std::map<std::string, int> metric_count;
  Json summary, provenance;
  std::vector<Json> artifacts;
};

Events Run(Status (*fn)(const BenchRequest&, EventSink*), const BenchRequest& req, Status* st) {
  Events ev;
  for (const Json& j : testing::CaptureEvents([&](EventSink* sink) { return fn(req, sink); }, st)) {
    if (j["ev"] == "metric") ev.metric_count[j["key"]]++;
    if (j["ev"] == "summary") ev.summary = j["values"];
    if (j["ev"] == "provenance") testing::MergeProvenance(&ev.provenance, j["fields"]);
    if (j["ev"] == "artifact") ev.artifacts.push_back(j);
  }
  return ev;
}

}  // namespace

TEST_CASE("bench-update: warm-ups discarded, median of the timed updates, device labelled") {
  Status st;
  Events ev = Run(RunBenchUpdate, TinyBench("bench-update", Json::object()), &st);
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

TEST_CASE("bench legs honour head states: fixed heads, and streaming heads shrink the KV cache") {
  BenchRequest req = TinyBench("bench-update", {{"bench", {{"fixed_heads", "0.0,1.*"}}},
                                                {"model", {{"head_modes", "0.1=pruned"}}}});
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
  Events fixed = Run(RunBenchUpdate, req, &st);
  REQUIRE(st.ok());

  Json decode = {{"bench", {{"lengths", "16,24"}, {"decode_tokens", 4}}}};
  Events full = Run(RunBenchDecode, TinyBench("bench-decode", decode), &st);
  REQUIRE(st.ok());
  Json stream = decode;
  stream["model"] = {{"head_modes", "*.0=streaming:2:4,*.1=streaming:2:4"}};
  Events half = Run(RunBenchDecode, TinyBench("bench-decode", stream), &st);
  REQUIRE(st.ok());
  CHECK(full.summary.contains("bench.decode_ms_per_token.l24"));
  CHECK(full.summary[metric::kBenchDecodeMsPerToken].get<double>() > 0);
  CHECK(half.summary["bench.kv_bytes.l24"].get<double>() <
        full.summary["bench.kv_bytes.l24"].get<double>());
  REQUIRE(full.artifacts.size() == 1);
  CHECK(full.artifacts[0]["kind"] == "bench_table");
  // Every layer ran the decoder's own cached attention, and provenance says so.
  CHECK(full.provenance["attention_paths"] ==
        Json::object({{"kv_cache_reference", {0, 1}}}));  // on the CPU
}

TEST_CASE("bench-prefill: one median per length x batch cell") {
  Status st;
  Events ev = Run(RunBenchPrefill,
                  TinyBench("bench-prefill", {{"bench", {{"lengths", "8,16"}, {"batch_sizes", "1,2"}}}}),
                  &st);
  REQUIRE(st.ok());
  for (const char* k : {"bench.prefill_ms.l8.b1", "bench.prefill_ms.l8.b2", "bench.prefill_ms.l16.b1",
                        "bench.prefill_ms.l16.b2"})
    CHECK(ev.summary[k].get<double>() > 0);
  CHECK(ev.summary[metric::kBenchPrefillMs] == ev.summary["bench.prefill_ms.l8.b1"]);
  // On the CPU both layers run the masked dense reference (no fast path there).
  CHECK(ev.provenance["attention_paths"] == Json::parse(R"({"dense_reference": [0, 1]})"));
}

}  // namespace headlab
