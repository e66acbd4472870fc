// The aoh.* run-config keys (payload/methods/aoh/README.md): their types, ranges, defaults
// and allowed names, defined here once. aoh_schema.cc registers them as a section of the
// run-config schema (common/method_schema.h), so the coordinator validates them at submit
// without LibTorch; aoh_options.cc reads the validated values and restates none of them.
// Torch-free.
#pragma once

#include "common/method_schema.h"

namespace headlab::aoh {

// Names of the enums of head_labels.h, indexed by the enum's value.
inline constexpr const char* kMetricNames[] = {"effective_rank", "frobenius", "spectral",
                                               "stable_rank"};                  // Metric
inline constexpr const char* kAggregationNames[] = {"mean", "min", "max"};      // GroupAggregation
inline constexpr const char* kSelectionNames[] = {"aoh", "reverse", "random"};  // Selection
// aoh.method: "none" (full attention, still evaluated), a Selection, or AoH-RoPE (§6.4).
inline constexpr const char* kMethodNames[] = {"none", "aoh", "aoh_rope", "random", "reverse"};
// aoh.decode_path: how the KV-cache decoder runs decode steps (aoh_options.h DecodePath).
inline constexpr const char* kDecodePathNames[] = {"graph", "fused", "reference"};
// aoh.eviction: when streaming heads trim their cache (head_state.h HeadState::chunk):
// after each prefill chunk of aoh.prefill_chunk tokens (AoH §5), or after every token.
inline constexpr const char* kEvictionNames[] = {"chunk", "token"};

}  // namespace headlab::aoh
