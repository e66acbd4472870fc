// Test helpers shared by the SAF tests (header only; LibTorch tests).
#pragma once

#include "payload/exec/exec_config.h"

namespace headlab::saf::testing {

// A tiny learned-position GPT shape: 2 layers x 4 heads, width 32, vocab 64.
inline ModelConfig TinyGptConfig(int64_t context, double mlp_ratio) {
  ModelConfig c;
  c.layers = 2;
  c.heads = 4;
  c.width = 32;
  c.context = context;
  c.mlp_ratio = mlp_ratio;
  c.vocab = 64;
  c.kv_heads = 4;
  c.pos = "learned";
  c.norm = "layernorm";
  return c;
}

}  // namespace headlab::saf::testing
