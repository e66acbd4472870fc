// SAF (fixed-pattern heads) as a method of the payload: the factory of its training hooks,
// which saf_method.cc registers in exec's method table (payload/exec/method_spec.h). Torch-
// free.
#pragma once

#include <memory>
#include <string>

#include "payload/exec/method_hooks.h"

namespace headlab {

// Returns the method's hooks for a run (defined in train_hooks.cc), or nullptr when the
// run's saf section leaves the method off; errors are InvalidArgument naming `file` and
// the field.
StatusOr<std::shared_ptr<TrainHooks>> MakeSafHooks(const ExecConfig& config,
                                                   const Json& config_json,
                                                   const std::string& file);

}  // namespace headlab
