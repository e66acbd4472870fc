// Run kind "train": pretraining of the decoder-only LM (model.h) with AdamW, a warm-up +
// cosine schedule, periodic held-out evaluation and exact checkpoints. Torch-free header.
#pragma once

#include <optional>
#include <string>

#include "common/json.h"
#include "common/status.h"
#include "payload/exec/events.h"
#include "payload/exec/exec_config.h"
#include "payload/exec/manifest.h"
#include "payload/exec/method_hooks.h"

namespace headlab {

struct TrainRequest {
  ExecConfig config;
  Json config_json;                   // the normalized config, stored in checkpoints for the record
  std::string out_dir;                // checkpoints and artifacts go here (created if missing)
  std::optional<ResumePoint> resume;  // own checkpoint of an earlier attempt (wins)
  std::optional<ResumePoint> parent;  // shared parent checkpoint a continuation starts from
  Json parent_run;                    // its run id, for provenance
  HookList hooks;                     // the methods' hooks (MakeMethodHooks), in call order
  int rank = 0;                       // data-parallel rank (train.ranks > 1; dist.h)
  std::string manifest_path;          // rank 0 starts its peers with it
};

// Runs the training described by `req`, streaming events to `events`. Returns Ok when all
// steps ran, Cancelled when a stop was requested (stop_flag.h; checked between steps),
// InvalidArgument for a config or data set that cannot be trained on, Corruption for a
// resume or parent checkpoint whose SHA-256 or step does not match, and other errors as they come.
Status RunTraining(const TrainRequest& req, EventSink* events);

// Returns the learning rate of update `step` (0-based; fractional under a time budget):
// linear warm-up over warmup_steps to lr, then cosine decay to lr * min_lr_ratio at the
// last step.
double ScheduledLr(const TrainConfig& t, double step);

// Returns the checkpoint path of `step` in `out_dir`.
std::string CheckpointPath(const std::string& out_dir, int64_t step);

}  // namespace headlab
