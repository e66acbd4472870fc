// cross_entropy_op.cc: CrossEntropyRows on tensors and the current CUDA stream.
#include "kernels/torch/cross_entropy_op.h"

#include "kernels/torch/dtype.h"

#if HEADLAB_TORCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "kernels/cross_entropy.h"
#endif

namespace headlab {
namespace kernels {

bool CrossEntropyRowsAvailable() {
#if HEADLAB_TORCH_CUDA
  return true;
#else
  return false;
#endif
}

torch::Tensor CrossEntropyRowsInPlace(torch::Tensor& logits, const torch::Tensor& targets) {
  TORCH_CHECK(logits.dim() == 2 && targets.dim() == 1 && targets.size(0) == logits.size(0),
              "cross entropy: logits must be [rows, vocab] and targets [rows]");
  TORCH_CHECK(logits.is_cuda() && targets.device() == logits.device(),
              "cross entropy: CUDA tensors on one device only");
  TORCH_CHECK(logits.stride(1) == 1 && targets.scalar_type() == torch::kLong,
              "cross entropy: contiguous rows and int64 targets");
#if HEADLAB_TORCH_CUDA
  c10::cuda::CUDAGuard guard(logits.device());
  const DType dtype = KernelDType(logits.scalar_type(), "cross entropy logits");
  torch::Tensor t = targets.contiguous();
  torch::Tensor loss = torch::empty({logits.size(0)}, logits.options().dtype(torch::kFloat));
  KernelStatus st =
      CrossEntropyRows(logits.data_ptr(), dtype, logits.size(0), logits.size(1), logits.stride(0),
                       t.data_ptr<int64_t>(), loss.data_ptr<float>(),
                       c10::cuda::getCurrentCUDAStream(logits.device().index()).stream());
  TORCH_CHECK(st.ok(), "cross entropy kernel: ", st.message);
  return loss;
#else
  TORCH_CHECK(false, "cross entropy: this build has no CUDA kernels");
  return torch::Tensor();
#endif
}

}  // namespace kernels
}  // namespace headlab
