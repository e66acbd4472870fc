// decode_linear_op.h: the decode step's linear layer (kernels/decode_linear.h) on LibTorch
// tensors, for the streaming decoder's captured step (payload/methods/aoh/streaming_decode.h).
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
torch::Tensor DecodeLinearOf(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                             DecodeActivation activation = DecodeActivation::kNone);

// Whether DecodeLinearNormedOf takes the fp32 residual x [.., K] and weight [N, K]: as
// DecodeLinearFits, with x a contiguous fp32 CUDA tensor of at most kMaxDecodeLinearRows rows
// and K <= kMaxNormedIn.
bool DecodeLinearNormedFits(const torch::Tensor& x, const torch::Tensor& weight);

// The norm before the layer in the layer's kernel (decode_linear.h DecodeNormIn): with delta
// ([.., K] in the weight's dtype) *x becomes a new tensor x + delta (fp32; the old one is not
// written), else *x stays; the layer's input is LayerNorm (rms false; norm_bias may be
// undefined) or RMSNorm (norm_bias undefined) of *x with fp32 [K] norm_weight, norm_bias and
// eps, rounded to the weight's dtype. Returns act(input W^T + bias) [.., N] in that dtype.
// The same statistics as AddNormInto (kernels/torch/add_norm_op.h). Throws c10::Error
// unless DecodeLinearNormedFits(*x, weight).
torch::Tensor DecodeLinearNormedOf(torch::Tensor* x, const torch::Tensor& delta, const torch::Tensor& norm_weight,
                                   const torch::Tensor& norm_bias, bool rms, double eps, const torch::Tensor& weight,
                                   const torch::Tensor& bias,
                                   DecodeActivation activation = DecodeActivation::kNone);

}  // namespace kernels
}  // namespace headlab
