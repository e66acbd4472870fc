// The model's shape and architecture (model.* of the run config, or a Hugging Face
// checkpoint's config.json through hf_config.h), as exec_config.h reads it. Torch-free.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "payload/exec/head_state.h"
#include "payload/exec/rope.h"

namespace headlab {

struct ModelConfig {
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t width = 0;
  int64_t context = 0;
  double mlp_ratio = 0;
  int64_t vocab = 0;
  int64_t kv_heads = 0;  // key/value heads (GQA); normalized: 0 -> heads
  std::string pos;       // learned | rope
  double rope_base = 0;
  RopeScaling rope_scaling;                // config.json's rope_scaling, or a preset's (rope.h)
  std::string norm;                        // layernorm | rmsnorm
  std::vector<HeadAssignment> head_modes;  // parsed model.head_modes
  // model.init_from: a Hugging Face checkpoint folder; "" = a fresh model. When set, the
  // fields below and the shape above come from its config.json (hf_config.h).
  std::string init_from;
  std::string family;            // "" (headlab's own) | gpt2 | llama | mistral | qwen2 | qwen3
  int64_t head_dim = 0;          // 0 = width / heads
  int64_t mlp_hidden = 0;        // 0 = round(mlp_ratio * width)
  std::string mlp_act = "gelu";  // gelu (erf) | gelu_tanh | swiglu (down(silu(gate x) * up x))
  bool attn_bias = false;        // q/k/v projection biases
  bool out_bias = false;         // attention output projection bias
  bool mlp_bias = false;         // MLP linear biases
  bool qk_norm = false;          // per-head RMSNorm of q and k before RoPE (Qwen 3)
  bool tie_head = true;          // the output head is the token embedding
  double norm_eps = 0;           // 0 = 1e-5 for LayerNorm, 1e-6 for RMSNorm

  // Derived sizes.
  int64_t HeadDim() const { return head_dim > 0 ? head_dim : width / heads; }
  int64_t MlpHidden() const {
    return mlp_hidden > 0 ? mlp_hidden : int64_t(std::llround(mlp_ratio * double(width)));
  }
  RopeSpec Rope() const { return {rope_base, rope_scaling}; }
  double NormEps() const { return norm_eps > 0 ? norm_eps : (norm == "rmsnorm" ? 1e-6 : 1e-5); }
};

}  // namespace headlab
