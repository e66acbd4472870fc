// decode_linear_op.cc: maps LibTorch tensors onto DecodeLinear's raw pointers and takes the
// current stream.
#include "kernels/torch/decode_linear_op.h"

#include "kernels/torch/dtype.h"

#if HEADLAB_TORCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace headlab {
namespace kernels {

bool DecodeLinearFits(const torch::Tensor& x, const torch::Tensor& weight) {
#if HEADLAB_TORCH_CUDA
  if (!x.defined() || !weight.defined() || !x.is_cuda() || !weight.is_cuda() || x.dim() < 1 ||
      weight.dim() != 2)
    return false;
  const int64_t K = weight.size(1), N = weight.size(0);
  if (x.size(-1) != K || x.numel() / std::max<int64_t>(K, 1) > kMaxDecodeLinearRows ||
      x.numel() == 0)
    return false;
  if (x.scalar_type() != weight.scalar_type() ||
      (x.scalar_type() != torch::kBFloat16 && x.scalar_type() != torch::kHalf))
    return false;
  return K % 32 == 0 && N % 8 == 0 && x.is_contiguous() && weight.is_contiguous() &&
         AlignedTo(x.data_ptr(), 16) && AlignedTo(weight.data_ptr(), 16);
#else
  (void)x, (void)weight;
  return false;
#endif
}

torch::Tensor DecodeLinearOf(const torch::Tensor& x, const torch::Tensor& weight,
                             const torch::Tensor& bias, DecodeActivation activation) {
  TORCH_CHECK(DecodeLinearFits(x, weight),
              "decode_linear: needs CUDA x [<= 16 rows, K] and weight [N, K], both contiguous bf16 "
              "or fp16 on "
              "16-byte boundaries, K % 32 == 0, N % 8 == 0");
#if HEADLAB_TORCH_CUDA
  const int64_t K = weight.size(1), N = weight.size(0), M = x.numel() / K;
  TORCH_CHECK(!bias.defined() || (bias.is_cuda() && bias.scalar_type() == x.scalar_type() &&
                                  bias.dim() == 1 && bias.size(0) == N && bias.is_contiguous()),
              "decode_linear: bias must be undefined or a contiguous [N] CUDA tensor in x's dtype");
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = N;
  torch::Tensor y = torch::empty(sizes, x.options());
  DecodeLinearArgs a;
  a.rows = int(M);
  a.in = int(K);
  a.out = int(N);
  a.dtype = KernelDType(x.scalar_type(), "decode_linear");
  a.x = x.data_ptr();
  a.x_stride = K;
  a.w = weight.data_ptr();
  a.w_stride = K;
  a.bias = bias.defined() ? bias.data_ptr() : nullptr;
  a.y = y.data_ptr();
  a.y_stride = N;
  a.activation = activation;
  c10::cuda::CUDAGuard guard(x.device());
  const KernelStatus st =
      DecodeLinear(a, c10::cuda::getCurrentCUDAStream(x.device().index()).stream());
  TORCH_CHECK(st.ok(), st.message);
  return y;
#else
  (void)bias, (void)activation;
  return torch::Tensor();
#endif
}

}  // namespace kernels
}  // namespace headlab
