// Test helper shared by flops_test.cc (cpu) and payload/measure/gpu_tests/
// flops_exec_gpu_test.cc (gpu): runs kind flops on a config and returns its events.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "common/run_config.h"
#include "payload/exec/event_capture.h"
#include "payload/exec/flops.h"
#include "payload/exec/test_util.h"

// Catch after everything that includes LibTorch (c10 defines CHECK too).
#include <catch2/catch.hpp>

namespace headlab::testing {

struct FlopsEvents {
  Json summary, provenance, artifact;  // the last of each
  std::string dir;                     // the run's out_dir (remove it when done)
};

// Normalizes `config`, runs RunFlops into a scratch directory named after `name` and
// REQUIREs that it succeeded.
inline FlopsEvents RunFlopsForTest(const Json& config, const std::string& name) {
  StatusOr<Json> normalized = NormalizeRunConfig(config, "test");
  REQUIRE(normalized.ok());
  StatusOr<ExecConfig> c = ExecConfigFromJson(normalized.value(), "test");
  REQUIRE(c.ok());
  FlopsEvents ev;
  ev.dir = ScratchPath(name);
  RemoveTree(ev.dir);
  Status s;
  const FlopsRequest req{c.value(), normalized.value(), ev.dir, {}};
  const std::vector<Json> events =
      CaptureEvents([&](EventSink* sink) { return RunFlops(req, sink); }, &s);
  INFO(s.ToString());
  REQUIRE(s.ok());
  for (const Json& j : events) {
    if (j["ev"] == "summary") ev.summary = j["values"];
    if (j["ev"] == "provenance") ev.provenance = j["fields"];
    if (j["ev"] == "artifact") ev.artifact = j;
  }
  return ev;
}

}  // namespace headlab::testing
