// Builds the training-loop hooks (train_hooks.h) of every method a run config turns on,
// from the registered methods (method_spec.h). Torch-free, so exec_main.cc can validate
// method sections before any LibTorch work.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "payload/exec/exec_config.h"

namespace headlab {

class TrainHooks;
using HookList = std::vector<std::shared_ptr<TrainHooks>>;

// A method's hooks for a run: nullptr when its section leaves the method off. Errors are
// InvalidArgument naming `file` and the field.
using HooksFactory = StatusOr<std::shared_ptr<TrainHooks>> (*)(const ExecConfig& config,
                                                               const Json& config_json,
                                                               const std::string& file);

// Returns the hooks in the order the loop calls them (MethodSpec::loop_order: pruning
// controls, SAF, AoH, AAH). `config_json` is the normalized run config; errors are
// InvalidArgument naming `file` and the field (exit 2 before training starts).
StatusOr<HookList> MakeMethodHooks(const ExecConfig& config, const Json& config_json,
                                   const std::string& file);

}  // namespace headlab
