// cross_entropy_op.h: kernels/cross_entropy.h on LibTorch tensors (CUDA only; the CPU and
// builds without the kernels use payload/exec/linear_cross_entropy.cc's tensor-op path).
#pragma once

#include <torch/torch.h>

namespace headlab {
namespace kernels {

// Returns true iff this build can run the kernel (LibTorch with CUDA, kernels compiled).
bool CrossEntropyRowsAvailable();

// logits: CUDA [rows, vocab] (fp32, bf16 or fp16; last dimension contiguous), targets:
// int64 [rows] on the same device. Returns the per-row loss (fp32 [rows]) and overwrites
// the logits with the gradient softmax - one-hot (kernels/cross_entropy.h). Not
// differentiable itself: the caller owns the gradient. Throws c10::Error on bad input.
torch::Tensor CrossEntropyRowsInPlace(torch::Tensor& logits, const torch::Tensor& targets);

}  // namespace kernels
}  // namespace headlab
