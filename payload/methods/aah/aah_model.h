// AAH-v3 on the training runtime's model (LibTorch translation units only): the
// observation of each head's Q/K/V statistics and attention diagnostics (AAH §5.3), in the
// update's forward or as a separate pass, installing the selected windows as local(W) head
// states (§5.8), and the per-step control hook the training loop calls.
#pragma once

#include <memory>

#include <torch/torch.h>

#include "common/status.h"
#include "payload/exec/bench_clock.h"
#include "payload/exec/model.h"
#include "payload/methods/aah/aah_report.h"
#include "payload/methods/aah/controller.h"

namespace headlab::aah {

// Runs a no-grad forward of `model` on tokens `idx` ([B, T]) and returns, per layer and
// query head: mu(|q|), sigma(q), mu(|k|), sigma(k), mu(|v|), sigma(v) of the projections
// (before the position encoding; k and v from the head's key/value head under GQA), and
// the diagnostics of the attention the head executes now: entropy (mean over queries of
// -sum p log p, nats), output norm (mean |y_h|_2 over batch and positions) and usage
// (the fraction of the context its mask allows, W_h / T). Heads that form no scores
// (fixed, pruned) report zero diagnostics. Uses the blocks' own modules, so the pass sees
// exactly the layer inputs of GptImpl::forward; model.cc's embedding step is mirrored here.
std::vector<HeadObservation> ObserveHeads(GptImpl& model, const torch::Tensor& idx);

// Installs `windows` ([layer][head]): local(W) for W < context, ordinary otherwise.
void ApplyWindows(GptImpl& model, const WindowMap& windows);

// Returns the key span each head of `model` executes now ([layer][head]): W for local(W),
// the context for ordinary and fixed heads, sink + recent for streaming, 0 for pruned. It
// reads the installed head states, so branch usage counts what ran, not what was planned.
WindowMap InstalledWindows(GptImpl& model);

// Returns which backend executes `model`'s heads on `device` for inputs of `batch` rows
// (AAH §7.7): fused_cuda when the CUDA kernels are built and enabled there (with each
// layer's fallback reason, attention_cuda.h), dense_masked otherwise.
ExecutionBackend ExecutionBackendOf(GptImpl& model, const torch::Device& device, int64_t batch);

// How a control update observes the model (AAH §5.3: "current Q/K/V statistics" and the
// previous attention diagnostics).
enum class Observation {
  // Inside the update's own forward: each attention layer, at the start of its forward on
  // the first micro-batch, queues the observation of its input on the device, with no wait
  // inside the step; after the backward, FinishControl reads every layer's rows with one
  // wait, runs the controller and installs its windows, which the next update executes
  // (§5.3: "between control updates, the cached per-head window indices are reused"). The
  // update's own forward runs the windows installed before it, so every layer observes
  // what the separate pass would. Each data-parallel rank would observe its own rows, so
  // one rank only.
  kInForward,
  // A separate no-grad forward (ObserveHeads) on the batch given to ControlStep, before
  // the update, with the controller's update there; FinishControl installs its windows as
  // with kInForward. What every data-parallel rank computes alike from the global batch.
  kSeparatePass,
};

// A control update in flight: ControlStep starts it, FinishControl ends it.
struct ControlRound {
  int64_t step = 0;    // the optimizer step it runs before
  int64_t layers = 0;  // layers observed so far
  // The controller's cost in seconds: the device time of the observations (CUDA events
  // around each layer's, no wait) plus the host's controller update.
  double seconds = 0;
  double host_seconds = 0;  // of which the host's controller update
  bool finished = false;
  // kInForward: each layer's observation rows ([H, 8], on the device) until FinishControl,
  // the length of the sequences observed, and the device time of their computation.
  std::vector<torch::Tensor> rows;
  int64_t sequence = 0;
  std::unique_ptr<DeviceStopwatch> device_time;
};

// The training-loop hook, before the forward of optimizer step `step` (0-based): installs
// the cached windows and, when a control update is due, starts one (nullptr otherwise)
// that observes the first aah.observe_rows rows (all when 0) of the update's batch: of `x`
// with kSeparatePass, of each layer's input in the update's first forward with kInForward.
// Either way the update executes the windows installed before it; FinishControl installs
// the new ones.
// InvalidArgument when the model's shape does not match the controller's.
StatusOr<std::shared_ptr<ControlRound>> ControlStep(AahController& controller, GptImpl& model,
                                                    int64_t step, const torch::Tensor& x,
                                                    Observation observation);

// After the update's backward: ends `round` (nothing when null or finished), removing any
// observer still armed; with kInForward, updates the controller from the observed rows;
// installs the controller's windows. Internal when the forward did not run every layer's observer
// (the update is then not counted).
Status FinishControl(AahController& controller, GptImpl& model, ControlRound* round);

}  // namespace headlab::aah
