// hybrid_attention_op.h: the hybrid-head attention layer as a LibTorch autograd op over the
// fused CUDA kernels (kernels/hybrid_attention.h). CUDA tensors only: the dense reference
// layer in payload/exec stays the CPU path and the test oracle. One of kernels/' two LibTorch
// translation units (with cross_entropy_op.cc); builds against Debian's LibTorch 1.13 (CPU:
// the op then reports itself unavailable) and LibTorch 2.11 with CUDA.
#pragma once

#include <torch/torch.h>

#include <utility>
#include <vector>

#include "kernels/hybrid_attention.h"

namespace headlab {
namespace kernels {

// A layer's head configuration. specs has one entry per query head; their alpha/rho/log_z
// pointers are ignored and taken from the tensors below instead: fp32 [R, L] on q's device,
// L >= T; fixed head h reads row prior_rows[h] (row h when prior_rows is empty) (SAF eq. 3;
// log_z[row, i] = log Z(i)). The tensors may be undefined when no head is fixed.
struct HybridHeads {
  std::vector<HeadSpec> specs;
  torch::Tensor alpha, rho, log_z;
  std::vector<int64_t> prior_rows;
};

// Which kernels the op runs (kernels/hybrid_attention.h ForwardPathName and
// BackwardPathName): "wgmma-ws", "wgmma", "mma.sync" or "simt". Both are set by the forward:
// the backward's is the one its arguments select (the forward's views, and gradient buffers
// that are contiguous as the backward allocates them).
struct KernelPaths {
  const char* forward = "";
  const char* backward = "";
  int head_dim = 0;  // the head size they ran at (ExecutedHeadDim: 128 for a padded d = 96)
};

// Returns true iff this build can run the op: LibTorch with CUDA and the kernels compiled.
bool HybridAttentionAvailable();

// Returns O (B, T, H, d), causal hybrid attention of q (B, T, H, d) over k, v (B, T, Hkv, d)
// with softmax scale `scale`; CUDA tensors of one dtype (fp32, bf16, fp16) whose last
// dimension is contiguous (views such as slices of a packed QKV tensor are fine).
// Differentiable in q, k and v; fixed heads' q and k gradients are exact zeros. A head size
// the kernels run larger (ExecutedHeadDim) is padded with zero columns inside the op; O and
// the gradients come back at d (views of the padded results).
// Throws c10::Error on bad input or when !HybridAttentionAvailable(). `paths`, when given,
// receives the forward kernel's implementation.
torch::Tensor HybridAttention(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v, const HybridHeads& heads, double scale,
                              KernelPaths* paths = nullptr);

// The forward alone, outside autograd: O (B, T, H, d) and lse (B, H, T) fp32, the natural
// log of each row's softmax normaliser with the scale applied (kernels/hybrid_attention.h),
// -inf for pruned heads. For statistics of the attention a layer executes (AAH-v3's
// entropy and output norm, payload/methods/aah/head_diagnostics.h). Same inputs and
// errors as HybridAttention.
std::pair<torch::Tensor, torch::Tensor> HybridAttentionWithLse(const torch::Tensor& q,
                                                               const torch::Tensor& k,
                                                               const torch::Tensor& v,
                                                               const HybridHeads& heads,
                                                               double scale);

}  // namespace kernels
}  // namespace headlab
