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

// The decoder tests' tiny shape (payload/decode, payload/methods/aoh): width 8 per head,
// vocab 32, RoPE base 100 with RMSNorm or learned positions with LayerNorm; GQA when
// kv_heads < heads.
inline ModelConfig TinyDecoderConfig(const std::string& pos, int64_t heads = 4,
                                     int64_t kv_heads = 4, int64_t context = 24,
                                     int64_t layers = 2) {
  ModelConfig c = TinyModelConfig(layers, heads, heads * 8, context, 32, pos, kv_heads);
  c.rope_base = 100;
  c.norm = pos == "rope" ? "rmsnorm" : "layernorm";
  return c;
}

}  // namespace headlab::testing
