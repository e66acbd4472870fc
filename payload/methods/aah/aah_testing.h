// Shared by the LibTorch tests of payload/methods/aah: a small model config.
#pragma once

#include <string>

#include "payload/exec/model_testing.h"

namespace headlab::aah::testing {

// Returns a layernorm model config of the given shape (kv_heads 0 = heads).
inline ModelConfig SmallModel(int64_t layers, int64_t heads, int64_t width, int64_t context,
                              int64_t vocab, const std::string& pos = "learned",
                              int64_t kv_heads = 0) {
  return headlab::testing::TinyModelConfig(layers, heads, width, context, vocab, pos, kv_heads);
}

}  // namespace headlab::aah::testing
