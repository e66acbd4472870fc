// The model presets' table.
#include "common/model_presets.h"

#include <iterator>

namespace headlab {
namespace {

ModelPreset Shape(const char* name, int64_t layers, int64_t heads, int64_t width, int64_t context,
                  int64_t vocab) {
  ModelPreset p{};
  p.name = name;
  p.layers = layers;
  p.heads = heads;
  p.width = width;
  p.context = context;
  p.vocab = vocab;
  return p;
}

// A Llama-family shape: RoPE, RMSNorm, SwiGLU, GQA, untied head.
ModelPreset Llama(const char* name, const char* family, int64_t layers, int64_t heads,
                  int64_t kv_heads, int64_t width, int64_t mlp_hidden, double theta, double eps,
                  int64_t context, int64_t vocab) {
  ModelPreset p = Shape(name, layers, heads, width, context, vocab);
  p.kv_heads = kv_heads;
  p.pos = "rope";
  p.rope_base = theta;
  p.norm = "rmsnorm";
  p.family = family;
  p.mlp_hidden = mlp_hidden;
  p.mlp_act = "swiglu";
  p.tie_head = false;
  p.norm_eps = eps;
  return p;
}

const ModelPreset* Table(size_t* n) {
  static const ModelPreset kPresets[] = {
      Shape("tiny", 2, 4, 128, 128, 256),       // the demo shape
      Shape("124m", 12, 12, 768, 4096, 50304),  // GPT-2 small shape, 50304 = 50257 padded to 64
      Shape("1b", 32, 16, 1536, 8192, 50304),
      [] {
        ModelPreset p =
            Llama("llama3.1-8b", "llama", 32, 32, 8, 4096, 14336, 500000, 1e-5, 131072, 128256);
        p.rope_scaling = "llama3";
        p.rope_factor = 8;
        p.rope_low_freq_factor = 1;
        p.rope_high_freq_factor = 4;
        p.rope_original_context = 8192;
        return p;
      }(),
      [] {
        ModelPreset p =
            Llama("qwen2.5-7b", "qwen2", 28, 28, 4, 3584, 18944, 1e6, 1e-6, 32768, 152064);
        p.attn_bias = true;
        return p;
      }(),
      [] {
        ModelPreset p =
            Llama("qwen3-8b", "qwen3", 36, 32, 8, 4096, 12288, 1e6, 1e-6, 40960, 151936);
        p.qk_norm = true;
        return p;
      }(),
  };
  *n = std::size(kPresets);
  return kPresets;
}

}  // namespace

const ModelPreset* FindModelPreset(const std::string& name) {
  size_t n = 0;
  const ModelPreset* t = Table(&n);
  for (size_t i = 0; i < n; ++i)
    if (name == t[i].name) return &t[i];
  return nullptr;
}

const std::string& ModelPresetNames() {
  static const std::string kNames = [] {
    size_t n = 0;
    const ModelPreset* t = Table(&n);
    std::string s;
    for (size_t i = 0; i < n; ++i) s += std::string("|") + t[i].name;
    return s;
  }();
  return kNames;
}

}  // namespace headlab
