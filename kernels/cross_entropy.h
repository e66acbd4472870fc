// cross_entropy.h: the language model's loss over rows of logits in one pass per row, and
// the gradient written over the logits in place (no LibTorch; launched from
// payload/exec/linear_cross_entropy.cc through kernels/torch/cross_entropy_op.h).
//
// For each row r of `logits` (rows x vocab, row stride `row_stride` elements, dtype fp32,
// bf16 or fp16) with target t = targets[r]:
//   loss[r]   = logsumexp_j logits[r, j] - logits[r, t]          (fp32; NaN if t is out of range)
//   logits[r, j] <- softmax_j(logits[r, :]) - [j == t]            (dloss[r] / dlogits[r, j])
// The row's max and sum of exponentials are computed online in fp32 in one read; the
// gradient costs one more read and one write. This is what cross_entropy(logits.float())
// with its backward computes, without the fp32 copies of the logits and their gradient.
#pragma once

#include <cstdint>

#include "kernels/hybrid_attention.h"  // DType, KernelStatus

namespace headlab {
namespace kernels {

// Launches on `stream` (a cudaStream_t; nullptr = default). All pointers are device pointers.
KernelStatus CrossEntropyRows(void* logits, DType dtype, int64_t rows, int64_t vocab,
                              int64_t row_stride, const int64_t* targets, float* loss,
                              void* stream);

}  // namespace kernels
}  // namespace headlab
