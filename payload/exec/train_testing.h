// Test helpers for runs of the real training loop (RunTraining) with the methods' hooks,
// shared by exec's and the methods' unit tests. LibTorch test translation units only.
#pragma once

#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/run_config.h"
#include "common/status.h"
#include "payload/exec/event_capture.h"
#include "payload/exec/events.h"
#include "payload/exec/exec_config.h"
#include "payload/exec/method_hooks.h"
#include "payload/exec/test_util.h"
#include "payload/exec/train.h"

// Catch after everything that includes LibTorch (c10 defines CHECK too).
#include <catch2/catch.hpp>

namespace headlab::testing {

// Returns the request of `config` as exec would run it: normalized (errors name `source`),
// parsed, with the hooks its method sections ask for, writing to the emptied scratch
// directory `scratch`.
inline StatusOr<TrainRequest> MakeTrainRequest(const Json& config, const std::string& source,
                                               const std::string& scratch) {
  StatusOr<Json> normalized = NormalizeRunConfig(config, source);
  if (!normalized.ok()) return normalized.status();
  StatusOr<ExecConfig> c = ExecConfigFromJson(normalized.value(), source);
  if (!c.ok()) return c.status();
  StatusOr<HookList> hooks = MakeMethodHooks(c.value(), normalized.value(), source);
  if (!hooks.ok()) return hooks.status();
  const std::string dir = ScratchPath(scratch);
  RemoveTree(dir);
  TrainRequest req{c.value(), normalized.value(), dir, std::nullopt};
  req.hooks = hooks.value();
  return req;
}

// Runs `req` and returns its status and every event it emitted, in order.
inline std::vector<Json> RunTrainingEvents(const TrainRequest& req, Status* status) {
  return CaptureEvents([&](EventSink* sink) { return RunTraining(req, sink); }, status);
}

// A run's events, collected.
struct TrainEvents {
  std::map<std::string, std::map<int64_t, double>> metrics;  // key -> step -> value
  std::vector<Json> artifacts;                               // every artifact event, in order
  std::map<std::string, std::vector<Json>> by_kind;          // artifact events of each kind
  std::vector<Json> checkpoints;                             // the checkpoint artifacts
  Json summary, provenance;

  // The resume point of the checkpoint written at `step` (throws if there is none).
  ResumePoint ResumeAt(int64_t step) const {
    for (const Json& c : checkpoints)
      if (c["step"] == step) return ResumePoint{c["path"], c["sha256"], step};
    throw std::out_of_range("no checkpoint at step " + std::to_string(step));
  }
};

// Runs `req` (its status into *status) and collects what it emitted.
inline TrainEvents CollectTrainingEvents(const TrainRequest& req, Status* status) {
  TrainEvents ev;
  for (const Json& j : RunTrainingEvents(req, status)) {
    if (j["ev"] == "metric") ev.metrics[j["key"]][j["step"]] = j["value"].get<double>();
    if (j["ev"] == "summary") ev.summary = j["values"];
    if (j["ev"] == "provenance") MergeProvenance(&ev.provenance, j["fields"]);
    if (j["ev"] != "artifact") continue;
    ev.artifacts.push_back(j);
    ev.by_kind[j["kind"]].push_back(j);
    if (j["kind"] == "checkpoint") ev.checkpoints.push_back(j);
  }
  return ev;
}

// CollectTrainingEvents of a run that must succeed (the failed REQUIRE shows its status).
inline TrainEvents CollectTrainingEventsOk(const TrainRequest& req) {
  Status st;
  TrainEvents ev = CollectTrainingEvents(req, &st);
  INFO(st.message());
  REQUIRE(st.ok());
  return ev;
}

// The request of a tiny CPU run (2 layers x 4 heads, width 32, context 32; 6 updates of
// batch 4, a log line each, checkpoints at steps 3 and 6) with `seed` and each of `patches`
// merged on in order (JSON merge patch: a method's section, then a test's overrides),
// writing to the scratch directory `scratch`.
inline TrainRequest TinyRunRequest(int64_t seed, const std::vector<Json>& patches,
                                   const std::string& scratch) {
  Json config = {{"seed", seed},
                 {"model", {{"layers", 2}, {"heads", 4}, {"width", 32}, {"context", 32}}},
                 {"train",
                  {{"threads", 1},
                   {"batch_size", 4},
                   {"warmup_steps", 2},
                   {"steps", 6},
                   {"log_every", 1},
                   {"eval_every", 0},
                   {"eval_batches", 2},
                   {"checkpoint_every", 3},
                   {"device", "cpu"}}}};
  for (const Json& patch : patches) config.merge_patch(patch);
  StatusOr<TrainRequest> req = MakeTrainRequest(config, "test", scratch);
  REQUIRE(req.ok());
  return req.value();
}

}  // namespace headlab::testing
