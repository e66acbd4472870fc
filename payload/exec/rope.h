// RoPE's frequencies (Su et al. 2021, RoFormer eq. 34: theta_i = base^(-2i/d)) and the two
// context-extension rescalings that pretrained checkpoints name in config.json's
// rope_scaling: Llama 3.1's ("llama3") and YaRN (Peng et al. 2023). Torch-free: the model's
// rotation (model.h RotaryEmbedding), the streaming decoder's tables and AoH's RoPE-aware
// scores all take their frequencies from here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace headlab {

struct RopeScaling {
  std::string type;              // "" (none) | llama3 | yarn
  double factor = 1;             // s: how many times the original context
  int64_t original_context = 0;  // L: original_max_position_embeddings
  double low_freq_factor = 1;    // llama3
  double high_freq_factor = 4;   // llama3
  double beta_fast = 32;         // yarn: alpha of YaRN eq. 18 (rotations, fast end)
  double beta_slow = 1;          // yarn: beta of YaRN eq. 18 (rotations, slow end)
  double attention_factor = 0;   // yarn: sqrt(1/t) of YaRN eq. 22; 0 = 0.1 ln(s) + 1

  bool operator==(const RopeScaling& o) const {
    return type == o.type && factor == o.factor && original_context == o.original_context &&
           low_freq_factor == o.low_freq_factor && high_freq_factor == o.high_freq_factor &&
           beta_fast == o.beta_fast && beta_slow == o.beta_slow &&
           attention_factor == o.attention_factor;
  }
};

// Everything that fixes a model's rotation: the base and its rescaling.
struct RopeSpec {
  double base = 10000;
  RopeScaling scaling;
};

// Returns the d/2 angular frequencies theta_i (radians per position) of pair (i, i + d/2),
// rescaled as `rope.scaling` says; head_dim even.
std::vector<double> RopeFrequencies(const RopeSpec& rope, int64_t head_dim);

// Returns the factor by which the rotation multiplies cos and sin (so q.k scales by its
// square): YaRN's attention temperature sqrt(1/t) (eq. 22), 1 otherwise.
double RopeAttentionFactor(const RopeSpec& rope);

}  // namespace headlab
