// The prune.* run-config keys (payload/methods/pruning/README.md): their types, ranges,
// defaults and allowed names, defined here once. The run-config schema
// (common/run_config.cc) composes them (registered in prune_schema.cc,
// common/method_schema.h), so the coordinator validates them at submit without LibTorch;
// prune_options.cc reads the validated values and restates none of them. Torch-free.
#pragma once

#include "common/method_schema.h"

namespace headlab {

// prune.method, indexed by PruneMethod (prune_options.h): no pruning, a prescribed head set,
// Gate-Taylor importance (SAF eq. 19), or SAF's own selection (saf.*).
inline constexpr const char* kPruneMethodNames[] = {"none", "heads", "gate_taylor", "saf"};

}  // namespace headlab
