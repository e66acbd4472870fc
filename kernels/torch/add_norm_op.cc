// add_norm_op.cc: maps LibTorch tensors onto AddNorm's raw pointers and takes the current
// stream.
#include "kernels/torch/add_norm_op.h"

#include "kernels/torch/dtype.h"

#if HEADLAB_TORCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "kernels/add_norm.h"
#endif

namespace headlab {
namespace kernels {

bool AddNormAvailable() {
#if HEADLAB_TORCH_CUDA
  return true;
#else
  return false;
#endif
}

torch::Tensor AddNormInto(torch::Tensor* x, const torch::Tensor& delta, const torch::Tensor& weight,
                          const torch::Tensor& bias, bool rms, double eps,
                          torch::ScalarType dtype) {
  TORCH_CHECK(AddNormAvailable(), "add_norm: this build has no CUDA kernels");
#if HEADLAB_TORCH_CUDA
  TORCH_CHECK(
      x->is_cuda() && x->scalar_type() == torch::kFloat && x->is_contiguous() && x->dim() >= 1,
      "add_norm: x must be a contiguous float32 CUDA tensor");
  const int64_t C = x->size(-1), rows = x->numel() / std::max<int64_t>(C, 1);
  TORCH_CHECK(weight.is_cuda() && weight.scalar_type() == torch::kFloat && weight.dim() == 1 &&
                  weight.size(0) == C && weight.is_contiguous(),
              "add_norm: weight must be a contiguous float32 CUDA tensor of the last dimension");
  TORCH_CHECK(!bias.defined() || (bias.is_cuda() && bias.scalar_type() == torch::kFloat &&
                                  bias.dim() == 1 && bias.size(0) == C && bias.is_contiguous()),
              "add_norm: bias must be undefined or like weight");
  torch::Tensor d;
  if (delta.defined()) {
    TORCH_CHECK(delta.is_cuda() && delta.sizes() == x->sizes(),
                "add_norm: delta must be a CUDA tensor shaped as x");
    d = delta.contiguous();
  }
  torch::Tensor y = torch::empty(x->sizes(), x->options().dtype(dtype));
  AddNormArgs a;
  a.rows = int(rows);
  a.width = int(C);
  a.x = x->data_ptr<float>();
  a.x_stride = C;
  if (d.defined()) {
    a.delta = d.data_ptr();
    a.delta_dtype = KernelDType(d.scalar_type(), "add_norm delta");
    a.delta_stride = C;
  }
  a.weight = weight.data_ptr<float>();
  a.bias = bias.defined() ? bias.data_ptr<float>() : nullptr;
  a.rms = rms;
  a.eps = float(eps);
  a.y = y.data_ptr();
  a.y_dtype = KernelDType(dtype, "add_norm output");
  a.y_stride = C;
  c10::cuda::CUDAGuard guard(x->device());
  const KernelStatus st = AddNorm(a, c10::cuda::getCurrentCUDAStream(x->device().index()).stream());
  TORCH_CHECK(st.ok(), st.message);
  return y;
#else
  (void)x, (void)delta, (void)weight, (void)bias, (void)rms, (void)eps, (void)dtype;
  return torch::Tensor();
#endif
}

}  // namespace kernels
}  // namespace headlab
