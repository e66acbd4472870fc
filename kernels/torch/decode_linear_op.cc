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

#if HEADLAB_TORCH_CUDA
namespace {

// What both forms need: CUDA x [.., K] of 1..kMaxDecodeLinearRows rows and weight [N, K] in
// bf16 or fp16, both contiguous, the weight on a 16-byte boundary, K % 32 == 0, N % 8 == 0.
bool ShapeFits(const torch::Tensor& x, const torch::Tensor& weight) {
  if (!x.defined() || !weight.defined() || !x.is_cuda() || !weight.is_cuda() || x.dim() < 1 || weight.dim() != 2)
    return false;
  const int64_t K = weight.size(1), N = weight.size(0);
  if (x.size(-1) != K || x.numel() == 0 || x.numel() / std::max<int64_t>(K, 1) > kMaxDecodeLinearRows) return false;
  if (weight.scalar_type() != torch::kBFloat16 && weight.scalar_type() != torch::kHalf) return false;
  return K % 32 == 0 && N % 8 == 0 && x.is_contiguous() && weight.is_contiguous() && AlignedTo(weight.data_ptr(), 16);
}

// Checks the bias and fills what DecodeLinearOf and DecodeLinearNormedOf share; y [M, N].
DecodeLinearArgs BaseArgs(int64_t M, const torch::Tensor& weight, const torch::Tensor& bias, const torch::Tensor& y,
                          DecodeActivation activation) {
  const int64_t K = weight.size(1), N = weight.size(0);
  TORCH_CHECK(!bias.defined() || (bias.is_cuda() && bias.scalar_type() == weight.scalar_type() && bias.dim() == 1 &&
                                  bias.size(0) == N && bias.is_contiguous()),
              "decode_linear: bias must be undefined or a contiguous [N] CUDA tensor in the weight's dtype");
  DecodeLinearArgs a;
  a.rows = int(M);
  a.in = int(K);
  a.out = int(N);
  a.dtype = KernelDType(weight.scalar_type(), "decode_linear");
  a.w = weight.data_ptr();
  a.w_stride = K;
  a.bias = bias.defined() ? bias.data_ptr() : nullptr;
  a.y = y.data_ptr();
  a.y_stride = N;
  a.activation = activation;
  return a;
}

void Launch(const DecodeLinearArgs& a, const torch::Device& device) {
  c10::cuda::CUDAGuard guard(device);
  const KernelStatus st = DecodeLinear(a, c10::cuda::getCurrentCUDAStream(device.index()).stream());
  TORCH_CHECK(st.ok(), st.message);
}

// [.., N] for input [.., K].
torch::Tensor OutputFor(const torch::Tensor& input, int64_t N, const torch::TensorOptions& options) {
  std::vector<int64_t> sizes = input.sizes().vec();
  sizes.back() = N;
  return torch::empty(sizes, options);
}

}  // namespace
#endif

bool DecodeLinearFits(const torch::Tensor& x, const torch::Tensor& weight) {
#if HEADLAB_TORCH_CUDA
  return ShapeFits(x, weight) && x.scalar_type() == weight.scalar_type() && AlignedTo(x.data_ptr(), 16);
#else
  (void)x, (void)weight;
  return false;
#endif
}

bool DecodeLinearNormedFits(const torch::Tensor& x, const torch::Tensor& weight) {
#if HEADLAB_TORCH_CUDA
  return ShapeFits(x, weight) && x.scalar_type() == torch::kFloat && weight.size(1) <= kMaxNormedIn;
#else
  (void)x, (void)weight;
  return false;
#endif
}

torch::Tensor DecodeLinearNormedOf(torch::Tensor* x, const torch::Tensor& delta, const torch::Tensor& norm_weight,
                                   const torch::Tensor& norm_bias, bool rms, double eps, const torch::Tensor& weight,
                                   const torch::Tensor& bias, DecodeActivation activation) {
  TORCH_CHECK(x != nullptr && DecodeLinearNormedFits(*x, weight),
              "decode_linear: a norm prologue needs a contiguous fp32 CUDA x [<= 16 rows, K <= 1024] and a contiguous "
              "bf16 or fp16 weight [N, K] on a 16-byte boundary, K % 32 == 0, N % 8 == 0");
#if HEADLAB_TORCH_CUDA
  const int64_t K = weight.size(1), N = weight.size(0), M = x->numel() / K;
  auto fp32_vector = [&](const torch::Tensor& t) {
    return t.is_cuda() && t.scalar_type() == torch::kFloat && t.dim() == 1 && t.size(0) == K && t.is_contiguous();
  };
  TORCH_CHECK(norm_weight.defined() && fp32_vector(norm_weight) && (!norm_bias.defined() || fp32_vector(norm_bias)),
              "decode_linear: the norm's weight and bias must be contiguous fp32 CUDA [K] tensors");
  TORCH_CHECK(!delta.defined() || (delta.is_cuda() && delta.scalar_type() == weight.scalar_type() &&
                                   delta.sizes() == x->sizes() && delta.is_contiguous()),
              "decode_linear: delta must be undefined or a contiguous CUDA tensor shaped as x in the weight's dtype");
  torch::Tensor y = OutputFor(*x, N, weight.options());
  DecodeLinearArgs a = BaseArgs(M, weight, bias, y, activation);
  DecodeNormIn& n = a.norm;
  n.x = x->data_ptr<float>();
  n.x_stride = K;
  torch::Tensor r;
  if (delta.defined()) {
    r = torch::empty_like(*x);
    n.delta = delta.data_ptr();
    n.delta_stride = K;
    n.x_out = r.data_ptr<float>();
  }
  n.weight = norm_weight.data_ptr<float>();
  n.bias = norm_bias.defined() ? norm_bias.data_ptr<float>() : nullptr;
  n.rms = rms;
  n.eps = float(eps);
  Launch(a, x->device());
  if (r.defined()) *x = r;
  return y;
#else
  (void)delta, (void)norm_weight, (void)norm_bias, (void)rms, (void)eps, (void)bias, (void)activation;
  return torch::Tensor();
#endif
}

torch::Tensor DecodeLinearOf(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                             DecodeActivation activation) {
  TORCH_CHECK(DecodeLinearFits(x, weight),
              "decode_linear: needs CUDA x [<= 16 rows, K] and weight [N, K], both contiguous bf16 or fp16 on "
              "16-byte boundaries, K % 32 == 0, N % 8 == 0");
#if HEADLAB_TORCH_CUDA
  const int64_t K = weight.size(1), N = weight.size(0), M = x.numel() / K;
  torch::Tensor y = OutputFor(x, N, x.options());
  DecodeLinearArgs a = BaseArgs(M, weight, bias, y, activation);
  a.x = x.data_ptr();
  a.x_stride = K;
  Launch(a, x.device());
  return y;
#else
  (void)bias, (void)activation;
  return torch::Tensor();
#endif
}

}  // namespace kernels
}  // namespace headlab
