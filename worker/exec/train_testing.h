// Test helpers for runs of the real training loop (RunTraining) with the methods' hooks,
// shared by exec's and the methods' unit tests. LibTorch test translation units only.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/run_config.h"
#include "common/status.h"
#include "worker/exec/events.h"
#include "worker/exec/exec_config.h"
#include "worker/exec/method_hooks.h"
#include "worker/exec/test_util.h"
#include "worker/exec/train.h"

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
  std::vector<Json> events;
  FILE* f = std::tmpfile();
  if (!f) {
    *status = Status::Internal("tmpfile failed");
    return events;
  }
  EventSink sink(f);
  *status = RunTraining(req, &sink);
  std::rewind(f);
  std::string text;
  char buf[1 << 16];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::fclose(f);
  for (size_t start = 0, end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
    events.push_back(Json::parse(text.substr(start, end - start)));
  return events;
}

}  // namespace headlab::testing
