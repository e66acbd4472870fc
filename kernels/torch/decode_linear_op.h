// decode_linear_op.h: the decode step's linear layer (kernels/decode_linear.h) on LibTorch
// tensors, for the streaming decoder's captured step (payload/decode/decoder.h).
// Builds against Debian's LibTorch 1.13 (CPU: DecodeLinearFits is false and the call throws)
// and LibTorch 2.11 with CUDA; inference only.
#pragma once

#include <torch/torch.h>

#include "kernels/decode_linear.h"  // DecodeActivation

namespace headlab {
namespace kernels {

// Whether DecodeLinearOf takes x [.., K] and weight [N, K]: a CUDA build, at most
// kMaxDecodeLinearRows rows of x, x and weight CUDA in the same bf16 or fp16 dtype, K a
// multiple of 32, N of 8, contiguous rows starting on 16-byte boundaries. The caller falls
// back to its module otherwise.
bool DecodeLinearFits(const torch::Tensor& x, const torch::Tensor& weight);

// act(x W^T + bias) [.., N] for x [.., K] (nn.Linear's product, then the activation), as one
// kernel: fp32 accumulation, the activation on the fp32 sum, rounded once to x's dtype. bias:
// [N] in x's dtype, or undefined. No host sync (it can be captured in a CUDA graph). Throws
// c10::Error unless DecodeLinearFits(x, weight).
torch::Tensor DecodeLinearOf(const torch::Tensor& x, const torch::Tensor& weight,
                             const torch::Tensor& bias,
                             DecodeActivation activation = DecodeActivation::kNone);

}  // namespace kernels
}  // namespace headlab
