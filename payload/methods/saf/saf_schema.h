// The saf.* run-config keys (payload/methods/saf/README.md): their types, ranges, defaults
// and allowed names, defined here once. saf_schema.cc registers them as a section of the
// run-config schema (common/method_schema.h), so the coordinator validates them at submit
// without LibTorch; saf_options.cc reads the validated values and restates none of them.
// Torch-free.
#pragma once

#include "common/method_schema.h"

namespace headlab::saf {

// Names of the enums of saf_options.h / scores.h, indexed by the enum's value.
inline constexpr const char* kScoreNames[] = {
    "variance",   "forward_kl",   "gradient",     "rank_sum", "gradient_veto", "magnitude",
    "redundancy", "residual_cos", "residual_rel", "random",   "gate_taylor",   "random_global"};
inline constexpr const char* kPatternNames[] = {"mean", "sharp_mean", "gaussian", "dirichlet",
                                                "structured_random"};
inline constexpr const char* kScheduleNames[] = {"one_time", "gradual", "validation_budget",
                                                 "train_loss"};

}  // namespace headlab::saf
