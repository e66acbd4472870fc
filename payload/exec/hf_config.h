// A Hugging Face checkpoint's config.json -> headlab's ModelConfig (model.init_from).
// Torch-free. The families and what each maps (schema/exec.md, "Imported checkpoints"):
//
//   gpt2     n_layer, n_head, n_embd, n_positions, vocab_size, n_inner (null = 4 n_embd),
//            activation_function gelu_new|gelu_pytorch_tanh (tanh GELU) or gelu,
//            layer_norm_epsilon; learned positions, LayerNorm, biases everywhere, tied head
//   llama    hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
//   mistral  num_key_value_heads (GQA), head_dim, rms_norm_eps, rope_theta, vocab_size,
//   qwen2    tie_word_embeddings, attention_bias, mlp_bias; RoPE (rotate-half), RMSNorm,
//   qwen3    SwiGLU; qwen2: q/k/v biases; qwen3: per-head q/k RMSNorm
//
// model.context stays the run's (a GPT-2 checkpoint allows at most n_positions). Refused,
// by name: rope_scaling other than null, sliding windows, other activations, other
// model_types, scale_attn_by_inverse_layer_idx.
#pragma once

#include <string>

#include "common/json.h"
#include "common/status.h"
#include "payload/exec/model_config.h"

namespace headlab {

// Reads DIR/config.json and fills *m's shape and architecture fields from it (keeping
// m->context, m->head_modes, m->init_from). Errors name DIR/config.json and the key.
Status ReadHfModelConfig(const std::string& dir, ModelConfig* m);
// The same from parsed JSON; `path` names it in errors.
Status ModelConfigFromHf(const Json& config, const std::string& path, ModelConfig* m);

}  // namespace headlab
