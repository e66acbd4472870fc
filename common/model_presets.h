// model.preset: the named model shapes (schema/grid.md, "Details fixed by the
// implementation"), one table for both readers: the run config (common/run_config.cc) takes
// the fields that are run-config keys (defaults <- preset <- explicit keys), exec
// (payload/exec/exec_config.cc) the architecture that has no key of its own. Torch-free.
//
// The pretrained families' shapes are their published config.json values, so a preset
// model and model.init_from of that checkpoint build the same parameters:
//   llama3.1-8b  Llama-3.1-8B: 32 layers, width 4096, 32 query / 8 KV heads of 128,
//                SwiGLU 14336, RMSNorm 1e-5, RoPE theta 500000 with rope_scaling llama3
//                (factor 8, low_freq_factor 1, high_freq_factor 4, original context 8192),
//                vocab 128256, untied head, context 131072
//   qwen2.5-7b   Qwen2.5-7B: 28 layers, width 3584, 28 / 4 heads of 128, q/k/v biases,
//                SwiGLU 18944, RMSNorm 1e-6, theta 1e6, vocab 152064, untied, context 32768
//   qwen3-8b     Qwen3-8B: 36 layers, width 4096, 32 / 8 heads of 128, per-head q/k
//                RMSNorm, SwiGLU 12288, RMSNorm 1e-6, theta 1e6, vocab 151936, untied,
//                context 40960
#pragma once

#include <cstdint>
#include <string>

namespace headlab {

struct ModelPreset {
  const char* name;
  // Run-config keys (model.*).
  int64_t layers, heads, width, context, vocab;
  int64_t kv_heads = 0;         // 0 = heads
  const char* pos = "learned";  // learned | rope
  double rope_base = 10000;
  const char* norm = "layernorm";  // layernorm | rmsnorm
  // Architecture without a run-config key (ModelConfig's fields of the same names).
  const char* family = "";  // "" (headlab's own) | llama | qwen2 | qwen3
  int64_t mlp_hidden = 0;   // 0 = model.mlp_ratio * width
  const char* mlp_act = "gelu";
  bool attn_bias = false;  // q/k/v biases
  bool qk_norm = false;
  bool tie_head = true;
  double norm_eps = 0;            // 0 = the norm's default
  const char* rope_scaling = "";  // "" | llama3 (the fields below)
  double rope_factor = 1, rope_low_freq_factor = 1, rope_high_freq_factor = 4;
  int64_t rope_original_context = 0;
};

// Returns the preset called `name`, or nullptr ("" and unknown names).
const ModelPreset* FindModelPreset(const std::string& name);

// "|tiny|124m|1b|llama3.1-8b|qwen2.5-7b|qwen3-8b": the allowed values of model.preset.
const std::string& ModelPresetNames();

}  // namespace headlab
