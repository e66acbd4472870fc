// The hybrid-head layer's fast path on CUDA: HybridAttentionImpl::forward hands a layer whose
// input lives on a CUDA device to the fused kernels' autograd op (kernels/torch/), which runs
// every head mode (ordinary, fixed compact, streaming, local, pruned; GQA) in one launch and
// writes outputs in head order. The dense masks of attention.cc stay the CPU path and the
// oracle this path is tested against (kernels/torch/exec_fused_gpu_test.cc).
//
// The op is linked only into CUDA builds (LibTorch with CUDA and nvcc: the device machine);
// elsewhere FusedAttentionCompiled() is false and every layer takes the dense path.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <torch/torch.h>

namespace headlab {

class HybridAttentionImpl;

// Returns true iff this build links the fused CUDA op.
bool FusedAttentionCompiled();

// Returns "" iff `layer` on input x can take the fused path, else why not (e.g. "input not
// on CUDA", "head_dim 32 unsupported (64, 96, 128)", "dense fixed pattern").
std::string FusedAttentionUnsupported(const HybridAttentionImpl& layer, const torch::Tensor& x);

// The layer's forward through the fused op: same contract as HybridAttentionImpl::forward
// (x [B, T, C] -> [B, T, C], `rotate` applied to queries and keys [B, h, T, d]). Requires
// FusedAttentionUnsupported(layer, x) == "".
torch::Tensor FusedAttentionForward(const HybridAttentionImpl& layer, const torch::Tensor& x,
                                    const std::function<torch::Tensor(const torch::Tensor&)>& rotate);

// Turns the fused path on (the default) or off for this process; off, CUDA layers run the
// dense reference (the oracle of the GPU tests).
void SetFusedAttentionEnabled(bool enabled);

// Returns how many layer forwards took the fused path in this process (tests assert on it).
int64_t FusedAttentionCalls();

// Returns the attention backend a model on `device` trains with, for provenance:
// "fused_cuda" (CUDA device, the op linked and enabled) or "dense_reference". A layer whose heads the
// op cannot take (see FusedAttentionUnsupported) still falls back to the dense path.
const char* AttentionBackendName(const torch::Device& device);

}  // namespace headlab
