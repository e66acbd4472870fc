// Run kind "flops": measured FLOPs, kernel time and memory of one forward and one training
// step of the configured model and method (AAH §5.10: FLOPs claims from profiler counters,
// never estimates). Torch-free header.
//
// After `flops.warmup` untimed forward + training-step pairs (the method hooks run as in
// training, AfterUpdate included, so a controller moves on), `flops.repeats` timed pairs
// (hooks up to AfterBackward only, so all see one method state) give the CUDA-event
// medians of the ranges "forward", "step", "step/forward", "step/backward",
// "step/optimizer", "step/method" (the method hooks; with "step/forward/method", the work a
// method does inside the forward, the methods' figures) and every "attention" range inside
// them (per layer "attention/L<k>" with flops.per_layer = 1); one traced pair joins CUPTI
// Activity kernel records to the same ranges; one pair under CUPTI counter replay
// (payload/measure/flop_counter.h) gives the FLOPs, the model and optimiser state restored
// before every replay pass. Attention ranges hold "proj" ranges around their projection
// GEMMs (payload/measure/range_paths.h), so the attention core is reported apart. The
// measured pairs walk a method controller's period (TrainHooks::ControlPeriod, at most 16
// steps): the timed repeats cycle through its phases and one pair is counted per phase, so
// flops.total_mean, flops.method_mean and time.method_mean_ms average control and
// non-control steps (flops.total and flops.method are the first phase's). Without a GPU or counter
// permission the FLOPs are `unmeasured` with the reason (provenance flops.status / flops.reason,
// and the flops.json artifact), never a number.
#pragma once

#include <string>

#include "common/json.h"
#include "common/status.h"
#include "payload/exec/events.h"
#include "payload/exec/exec_config.h"
#include "payload/exec/method_hooks.h"

namespace headlab {

struct FlopsRequest {
  ExecConfig config;
  Json config_json;     // the normalized config (its "flops" section drives the kind)
  std::string out_dir;  // flops.json goes here
  HookList hooks;       // the method's training hooks, called as in a training step
};

// Runs the measurement and streams metrics, the flops.json artifact and a summary.
// InvalidArgument for a config it cannot run; other errors as they come.
Status RunFlops(const FlopsRequest& req, EventSink* events);

}  // namespace headlab
