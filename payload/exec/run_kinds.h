// The table of run kinds `headlab exec` can run (schema/exec.md): each kind's name, what it
// allows, and the function that runs it. exec_main.cc looks the configured kind up here
// instead of testing names one by one; a method adds its kinds through its MethodSpec
// (method_spec.h). Torch-free header.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "payload/exec/bench_update.h"
#include "payload/exec/events.h"
#include "payload/exec/exec_config.h"
#include "payload/exec/manifest.h"
#include "payload/exec/method_hooks.h"
#include "payload/exec/train.h"

namespace headlab {

// One attempt as exec_main.cc loaded it: the manifest, its config and the methods it turns on.
struct LoadedRun {
  Manifest manifest;
  Json normalized;  // the manifest's config after NormalizeRunConfig
  ExecConfig config;
  HookList hooks;    // the methods the config turns on
  int rank = 0;      // data-parallel rank (`exec --rank R`)
  std::string file;  // the manifest's path, for error messages and peer launch
};

struct RunKind {
  std::string name;  // $.config.kind
  // True iff the kind launches and joins data-parallel peers (dist.h), so train.ranks > 1
  // is allowed; any other kind runs one process and would report it as N.
  bool data_parallel = false;
  // Non-empty: the kind cannot run a method's training hooks, and a config that turns a
  // method on is refused (Unavailable) with this reason instead of being mislabelled.
  std::string refuses_methods;
  Status (*run)(const LoadedRun& run, EventSink* events) = nullptr;
};
using RunKindTable = std::vector<RunKind>;

// Returns the kind named `name`, or nullptr when this build cannot run it.
const RunKind* FindRunKind(const std::string& name);

// Checks that `kind` (nullptr: not in the table) may run `run`, then runs it. The errors
// name run.file and the config field: InvalidArgument for train.ranks > 1 on a one-process
// kind or an unknown kind, Unavailable for methods on a kind that refuses them.
Status RunOneKind(const RunKind* kind, const LoadedRun& run, EventSink* events);

// The requests of the run functions (train.h, bench_update.h) for `run`.
TrainRequest TrainRequestOf(const LoadedRun& run);
BenchRequest BenchRequestOf(const LoadedRun& run);

// The bench kinds time the model with its model.head_modes; a method's training hooks
// would not run inside them (RunKind::refuses_methods).
inline constexpr const char* kBenchRefusesMethods =
    "times model.head_modes only and cannot run a method's hooks (saf/aoh/aah); set the heads "
    "with model.head_modes";

}  // namespace headlab
