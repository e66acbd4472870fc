// The typed run config that exec works from: the normalized JSON config (common/run_config.h)
// read once into plain fields, so the training code never looks up JSON keys.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "payload/exec/head_state.h"

namespace headlab {

struct ModelConfig {
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t width = 0;
  int64_t context = 0;
  double mlp_ratio = 0;
  int64_t vocab = 0;
  int64_t kv_heads = 0;          // key/value heads (GQA); normalized: 0 -> heads
  std::string pos;               // learned | rope
  double rope_base = 0;
  std::string norm;              // layernorm | rmsnorm
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
  int64_t MlpHidden() const;
  double NormEps() const { return norm_eps > 0 ? norm_eps : (norm == "rmsnorm" ? 1e-6 : 1e-5); }
};

struct TrainConfig {
  int64_t steps = 0;
  int64_t batch_size = 0;  // sequences per micro-batch
  int64_t grad_accum = 1;  // micro-batches per update
  double lr = 0;
  double min_lr_ratio = 0;
  int64_t warmup_steps = 0;
  double weight_decay = 0;
  double beta1 = 0;
  double beta2 = 0;
  double grad_clip = 0;  // 0 = no clipping
  int64_t eval_every = 0;
  int64_t eval_batches = 0;
  int64_t log_every = 0;
  int64_t checkpoint_every = 0;
  double time_budget_s = 0;  // > 0: matched-time run (SAF App. C.3.3); steps shapes the schedule
  std::string device;  // auto | cpu | cuda
  int64_t threads = 0;
  int64_t ranks = 1;   // data-parallel processes (dist.h)
  std::string allreduce_dtype;  // fp32 | bf16: what gradients travel in (grad_reducer.h)
  std::string precision;  // auto | bf16 | fp16 | fp32 (precision.h)
  std::string attention;  // auto | fused | dense (attention_cuda.h AttentionMode)
};

struct DataConfig {
  std::string source;  // builtin | shards | corpus
  std::string path;
  double val_fraction = 0;
  double calib_fraction = 0;  // > 0: HoldOutCalibration (data.h)
};

struct NoopConfig {
  int64_t duration_ms = 0;
  int64_t metrics = 0;
};

struct ExecConfig {
  std::string kind;  // train | noop
  int64_t seed = 0;
  ModelConfig model;
  TrainConfig train;
  DataConfig data;
  NoopConfig noop;
};

// Reads a normalized run config (every key present, already range-checked by
// NormalizeRunConfig) into an ExecConfig. A missing or mistyped key is InvalidArgument
// naming `file` and the JSON path. With model.init_from, the model's shape is read from the
// checkpoint's config.json (errors name that file).
StatusOr<ExecConfig> ExecConfigFromJson(const Json& config, const std::string& file);

}  // namespace headlab
