// Test helpers shared by the AoH unit tests: tiny model shapes (torch-free header).
#pragma once

#include <string>

#include "payload/exec/model_testing.h"

namespace headlab::aoh {

// The tiny decoder model config (payload/exec/model_testing.h TinyDecoderConfig).
inline ModelConfig TinyModelConfig(const std::string& pos, int64_t heads = 4, int64_t kv_heads = 4,
                                   int64_t context = 24, int64_t layers = 2) {
  return headlab::testing::TinyDecoderConfig(pos, heads, kv_heads, context, layers);
}

}  // namespace headlab::aoh
