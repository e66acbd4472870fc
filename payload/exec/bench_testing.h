// Test helpers for the bench run kinds (bench_update.h, methods/aoh/bench_latency.h): a tiny
// leg's request and the events it emitted. Shared by exec's and AoH's unit tests.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/run_config.h"
#include "common/status.h"
#include "payload/exec/bench_update.h"
#include "payload/exec/event_capture.h"
#include "payload/exec/test_util.h"

// Catch after everything that includes LibTorch (c10 defines CHECK too).
#include <catch2/catch.hpp>

namespace headlab::testing {

// A bench leg of kind `kind` on a 2-layer, 4-head model on the CPU, `overrides` merged into
// its config; its out_dir is a fresh scratch folder.
inline BenchRequest TinyBench(const std::string& kind, const Json& overrides) {
  Json config = {
      {"kind", kind},
      {"seed", 2},
      {"model", {{"layers", 2}, {"heads", 4}, {"width", 32}, {"context", 32}, {"pos", "rope"}}},
      {"train", {{"threads", 1}, {"batch_size", 2}, {"grad_accum", 2}, {"device", "cpu"}}},
      {"bench", {{"warmup", 1}, {"repeats", 3}}}};
  config.merge_patch(overrides);
  StatusOr<Json> normalized = NormalizeRunConfig(config, "test");
  REQUIRE(normalized.ok());
  StatusOr<ExecConfig> c = ExecConfigFromJson(*normalized, "test");
  REQUIRE(c.ok());
  std::string dir = ScratchPath("headlab_bench_" + kind);
  RemoveTree(dir);
  return BenchRequest{*c, *normalized, "test", dir};
}

struct BenchEvents {
  std::map<std::string, int> metric_count;
  Json summary, provenance;
  std::vector<Json> artifacts;
};

// Runs `fn` on `req`; its status goes to *st.
inline BenchEvents RunBench(Status (*fn)(const BenchRequest&, EventSink*), const BenchRequest& req,
                            Status* st) {
  BenchEvents ev;
  for (const Json& j : CaptureEvents([&](EventSink* sink) { return fn(req, sink); }, st)) {
    if (j["ev"] == "metric") ev.metric_count[j["key"]]++;
    if (j["ev"] == "summary") ev.summary = j["values"];
    if (j["ev"] == "provenance") MergeProvenance(&ev.provenance, j["fields"]);
    if (j["ev"] == "artifact") ev.artifacts.push_back(j);
  }
  return ev;
}

}  // namespace headlab::testing
