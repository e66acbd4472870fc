// Test helpers shared by the AoH unit tests: tiny model shapes (torch-free header).
#pragma once

#include <string>

#include "payload/exec/exec_config.h"

namespace headlab::aoh {

// A tiny decoder model config: `pos` learned | rope, GQA when kv_heads < heads.
inline ModelConfig TinyModelConfig(const std::string& pos, int64_t heads = 4, int64_t kv_heads = 4,
                                   int64_t context = 24, int64_t layers = 2) {
  ModelConfig m;
  m.layers = layers;
  m.heads = heads;
  m.width = heads * 8;
  m.context = context;
  m.mlp_ratio = 2;
  m.vocab = 32;
  m.kv_heads = kv_heads;
  m.pos = pos;
  m.rope_base = 100;
  m.norm = pos == "rope" ? "rmsnorm" : "layernorm";
  return m;
}

}  // namespace headlab::aoh
