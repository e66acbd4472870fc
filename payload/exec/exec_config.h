// The typed run config that exec works from: the normalized JSON config (common/run_config.h)
// read once into plain fields, so the training code never looks up JSON keys.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "payload/exec/head_state.h"
#include "payload/exec/model_config.h"

namespace headlab {

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
  std::string device;        // auto | cpu | cuda
  int64_t threads = 0;
  int64_t ranks = 1;            // data-parallel processes (dist.h)
  std::string allreduce_dtype;  // fp32 | bf16: what gradients travel in (grad_reducer.h)
  std::string precision;        // auto | bf16 | fp16 | fp32 (precision.h)
  std::string attention;        // auto | fused | dense (attention_cuda.h AttentionMode)
};

struct DataConfig {
  std::string source;  // builtin | shards | corpus
  std::string path;
  double val_fraction = 0;
  double calib_fraction = 0;      // > 0: HoldOutCalibration (data.h)
  double retrieval_fraction = 0;  // > 0: RetrievalMix rows (retrieval_mix.h)
  std::string retrieval_tasks;    // its comma list of tasks
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
