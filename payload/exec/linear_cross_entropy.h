// The language model's loss without materialising all of its logits. Included only by
// LibTorch translation units.
//
// LinearCrossEntropy(h, w, targets) = mean_r cross_entropy(h_r w^T, targets_r), with h [N, C]
// the final hidden states and w [V, C] the (tied) output head: rows are taken in chunks;
// each chunk's logits are one GEMM in `dtype` (bf16 under train.precision bf16), their
// log-sum-exp, loss and gradient softmax - one-hot are computed per row in fp32 (on CUDA one
// kernel over the logits in place, kernels/cross_entropy.h; elsewhere tensor ops), and the
// chunk's dh and dw are two more GEMMs at once. Equal to cross_entropy(linear(h, w).float(),
// targets) and its backward, without the [N, V] fp32 logits, log-probabilities and their
// gradient (6.6 GB each for 8 x 4096 tokens of GPT-2's vocabulary), which were the largest
// memory traffic of a training step.
#pragma once

#include <torch/torch.h>

namespace headlab {

// h: [N, C] (any float dtype; its gradient comes in its dtype), w: [V, C], targets: int64
// [N] in [0, V). Returns the mean loss in nats (fp32 scalar; fp64 when dtype is fp64),
// differentiable in h and w.
// `chunk_rows` > 0 fixes the chunk (tests); 0 keeps each chunk's fp32 row data near 1 GiB.
torch::Tensor LinearCrossEntropy(const torch::Tensor& h, const torch::Tensor& w,
                                 const torch::Tensor& targets, torch::ScalarType dtype,
                                 int64_t chunk_rows = 0);

}  // namespace headlab
