// Named measurement ranges around LibTorch code, forward and backward (run kind "flops").
// LibTorch translation units only.
//
// MarkRange(name, x, f) returns f(x) with the range `name` open while f's kernels are
// launched, and open again while autograd runs f's backward: identity autograd nodes at
// f's input and output push and pop the range in both directions. With no measurement
// marker installed (measure::ActiveMarker() is null: every run kind but "flops") it is
// f(x) and nothing else.
#pragma once

#include <functional>
#include <string>

#include <torch/torch.h>

namespace headlab {

torch::Tensor MarkRange(const std::string& name, const torch::Tensor& x,
                        const std::function<torch::Tensor(const torch::Tensor&)>& f);

// Attention layers call this first: true iff a marker is installed and this thread is not
// already inside MarkAttentionRange (so the marked call runs the plain forward).
bool AttentionRangeWanted();
// MarkRange("attention", ...), nested "attention/L<k>" when per-layer ranges are on; k
// counts attention calls since the last ResetAttentionLayers().
torch::Tensor MarkAttentionRange(const torch::Tensor& x,
                                 const std::function<torch::Tensor(const torch::Tensor&)>& f);

// Inside an attention range: MarkRange("proj", ...) (payload/measure/range_paths.h), around
// a projection GEMM, so the attention core (attention - projections) can be told apart.
// Elsewhere, or with no marker: f(x).
torch::Tensor MarkProjection(const torch::Tensor& x,
                             const std::function<torch::Tensor(const torch::Tensor&)>& f);

// Per-layer attention ranges on or off (off by default), and the layer counter reset that
// starts every forward.
void SetPerLayerAttentionRanges(bool on);
void ResetAttentionLayers();

}  // namespace headlab
