// The aah.* run-config keys (payload/methods/aah/README.md): their types, ranges, defaults
// and allowed names, defined here once. aah_schema.cc registers them as a section of the
// run-config schema (common/method_schema.h), so the coordinator validates them at submit
// without LibTorch; aah_options.cc reads the validated values and restates none of them.
// Torch-free.
#pragma once

#include "common/method_schema.h"

namespace headlab::aah {

// Names of the enums of aah_options.h, indexed by the enum's value.
inline constexpr const char* kRegimeNames[] = {
    "off", "full", "grouping_off", "full_adaptive", "shallow_freeze", "deep_reuse"};  // Regime
inline constexpr const char* kControlNames[] = {"none",
                                                "control_off",
                                                "fixed_random_grouping",
                                                "freeze_after_warmup",
                                                "independent_scoring",
                                                "no_parent_constraint",
                                                "no_feature_ema",
                                                "fixed_window",
                                                "random_window",
                                                "shuffle_post_select"};         // Control
inline constexpr const char* kResolutionStateNames[] = {"rounded", "running"};  // ResolutionState

}  // namespace headlab::aah
