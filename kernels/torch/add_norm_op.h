// add_norm_op.h: the add + norm kernel (kernels/add_norm.h) on LibTorch tensors, for the
// streaming decoder's captured step (payload/decode/decoder.h). Builds against
// Debian's LibTorch 1.13 (CPU: AddNormAvailable() is false and the call throws) and LibTorch
// 2.11 with CUDA; inference only (no autograd).
#pragma once

#include <torch/torch.h>

namespace headlab {
namespace kernels {

// Returns true iff this build can run the kernel: LibTorch with CUDA and the kernels.
bool AddNormAvailable();

// x <- x + delta (when delta is defined), then returns norm(x) in `dtype`: LayerNorm with
// `weight` and `bias` (bias may be undefined), or RMSNorm with `weight` when `rms`, over the
// last dimension (add_norm.h). x: fp32, contiguous, CUDA, [..., C]; delta: x's shape, any
// floating dtype of the kernel; weight, bias: fp32 [C]. Runs on the current stream without a
// host sync (it can be captured in a CUDA graph). Throws c10::Error on bad input.
torch::Tensor AddNormInto(torch::Tensor* x, const torch::Tensor& delta, const torch::Tensor& weight,
                          const torch::Tensor& bias, bool rms, double eps, torch::ScalarType dtype);

}  // namespace kernels
}  // namespace headlab
