// AAH-v3 on the training runtime's model (LibTorch translation units only): the
// observation pass that measures each head's Q/K/V statistics and attention diagnostics
// (AAH §5.3), installing the selected windows as local(W) head states (§5.8), and the
// per-step control hook the training loop calls.
#pragma once

#include <torch/torch.h>

#include "common/status.h"
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

// The training-loop hook: before the forward of optimizer step `step` (0-based), runs a
// control update when one is due, observing the first aah.observe_rows rows of the batch
// `x` (all when 0), and installs the resulting windows; otherwise the cached windows stay
// (AAH §5.3). Sets *updated when an update ran. InvalidArgument when the model's shape
// does not match the controller's.
Status ControlStep(AahController& controller, GptImpl& model, int64_t step,
                   const torch::Tensor& x, bool* updated = nullptr);

}  // namespace headlab::aah
