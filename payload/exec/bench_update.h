// Run kind "bench-update": the time of full optimiser updates (SAF §4, App. C.4: "each
// timed update includes all accumulation steps, the task loss, backward pass, gradient
// clipping, AdamW update, and gradient reset") of the configured model with its head
// states (model.head_modes), bench.warmup updates discarded, then bench.repeats timed
// ones; the median is the run's bench.update_ms. One leg of a paired timing measurement
// (pair.*): each leg is its own process. With train.ranks > 1 the leg is data parallel
// (dist.h: rank 0 launches ranks 1..N-1, one GPU each), every update includes the gradient
// all-reduce, and an update's time is the slowest rank's (SAF App. C.5's four-GPU
// benchmark); the summary adds dist.ranks and dist.allreduce_s, the median over the timed
// updates of the communication rank 0 waited for after its last backward. Torch-free header.
#pragma once

#include <string>

#include "common/json.h"
#include "common/status.h"
#include "payload/exec/events.h"
#include "payload/exec/exec_config.h"

namespace headlab {

struct BenchRequest {
  ExecConfig config;
  Json config_json;     // the normalized config (bench.* keys)
  std::string file;     // the manifest, for error messages
  std::string out_dir;  // artifacts (bench tables) go here
  int rank = 0;         // data-parallel rank (bench-update with train.ranks > 1)
};

// Runs the updates and reports per-update metrics, provenance (device, timer, memory
// kind) and the summary. InvalidArgument for bad bench.* values, Cancelled on SIGTERM.
Status RunBenchUpdate(const BenchRequest& req, EventSink* events);

}  // namespace headlab
