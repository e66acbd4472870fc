// A small model config shared by the LibTorch unit tests (exec's and the methods').
#pragma once

#include <cstdint>
#include <string>

#include "payload/exec/exec_config.h"

namespace headlab::testing {

// Returns a LayerNorm model config of the given shape, MLP ratio 2 (kv_heads 0 = heads).
inline ModelConfig TinyModelConfig(int64_t layers, int64_t heads, int64_t width, int64_t context,
                                   int64_t vocab, const std::string& pos = "learned",
                                   int64_t kv_heads = 0) {
  ModelConfig c;
  c.layers = layers;
  c.heads = heads;
  c.width = width;
  c.context = context;
  c.mlp_ratio = 2;
  c.vocab = vocab;
  c.kv_heads = kv_heads > 0 ? kv_heads : heads;
  c.pos = pos;
  c.rope_base = 10000;
  c.norm = "layernorm";
  return c;
}

}  // namespace headlab::testing
