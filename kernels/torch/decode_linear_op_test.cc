// decode_linear_op_test.cc: the decode step's linear layer (decode_linear_op.h) against a
// float64 product written here: act(x W^T + bias) of the same bf16 / fp16 inputs, with GELU
// as erf and as the tanh form computed in float64. The 124M decode step's shapes (q/k/v
// 768 -> 2304, MLP down 3072 -> 768) at 1, 5 and 16 rows, with and without a bias, as
// [M, K] and as a step's [M, 1, K]; every element within 1 unit in the last place of the
// output dtype (+ 1e-3 absolute for results near zero). Then the shapes the kernel does not
// take (17 rows, fp32, K = 760, N = 2300, a transposed x) are refused by DecodeLinearFits,
// and a call with one throws. Plain main; gpu label.
#include <cmath>
#include <cstdio>
#include <string>

#include "kernels/torch/decode_linear_op.h"
#include "kernels/torch/plain_test.h"

namespace headlab {
namespace kernels {
namespace {

using plain_test::Expect;

torch::Tensor Want(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& bias,
                   DecodeActivation act) {
  torch::Tensor y = torch::matmul(x.to(torch::kDouble), w.to(torch::kDouble).t());
  if (bias.defined()) y = y + bias.to(torch::kDouble);
  if (act == DecodeActivation::kGelu) return 0.5 * y * (1 + torch::erf(y / std::sqrt(2.0)));
  if (act == DecodeActivation::kGeluTanh)
    return 0.5 * y * (1 + torch::tanh(std::sqrt(2.0 / M_PI) * (y + 0.044715 * y * y * y)));
  return y;
}

void Case(torch::ScalarType dt, int64_t M, int64_t N, int64_t K, bool with_bias,
          DecodeActivation act, bool step) {
  const auto opts = torch::TensorOptions().device(torch::kCUDA).dtype(dt);
  torch::Tensor x = step ? torch::randn({M, 1, K}, opts) : torch::randn({M, K}, opts);
  torch::Tensor w = (torch::randn({N, K}, opts.dtype(torch::kFloat)) / std::sqrt(double(K))).to(dt);
  torch::Tensor bias = with_bias ? torch::randn({N}, opts) : torch::Tensor();
  char what[160];
  std::snprintf(what, sizeof(what), "%s M=%lld %lld -> %lld%s%s%s",
                std::string(c10::toString(dt)).c_str(), (long long)M, (long long)K, (long long)N,
                with_bias ? " + bias" : "",
                act == DecodeActivation::kGelu       ? ", GELU"
                : act == DecodeActivation::kGeluTanh ? ", GELU (tanh)"
                                                     : "",
                step ? ", [M, 1, K]" : "");
  Expect(DecodeLinearFits(x, w), std::string(what) + ": fits");
  torch::Tensor y = DecodeLinearOf(x, w, bias, act);
  std::vector<int64_t> want_sizes = x.sizes().vec();
  want_sizes.back() = N;
  const torch::Tensor want = Want(x, w, bias, act);
  const double ulp = dt == torch::kBFloat16 ? 1.0 / 128 : 1.0 / 1024;
  const bool close =
      ((y.to(torch::kDouble) - want).abs() <= want.abs() * ulp + 1e-3).all().item<bool>();
  Expect(y.sizes() == torch::IntArrayRef(want_sizes) && y.scalar_type() == dt && close,
         std::string(what));
}

}  // namespace
}  // namespace kernels
}  // namespace headlab

int main() {
  using namespace headlab::kernels;
  if (!plain_test::CudaDevice()) return 1;
  torch::manual_seed(5);
  torch::NoGradGuard no_grad;
  for (torch::ScalarType dt : {torch::kBFloat16, torch::kHalf})
    for (int64_t M : {1, 5, 16})
      for (bool bias : {false, true}) {
        Case(dt, M, 2304, 768, bias, DecodeActivation::kNone, /*step=*/M == 16);
        Case(dt, M, 768, 3072, bias, DecodeActivation::kNone, /*step=*/false);
      }
  for (DecodeActivation act : {DecodeActivation::kGelu, DecodeActivation::kGeluTanh})
    for (int64_t M : {1, 16}) Case(torch::kBFloat16, M, 3072, 768, true, act, /*step=*/true);

  const auto bf = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  const torch::Tensor w = torch::randn({2304, 768}, bf);
  Expect(!DecodeLinearFits(torch::randn({17, 768}, bf), w), "17 rows: not taken");
  Expect(!DecodeLinearFits(torch::randn({16, 768}, bf.dtype(torch::kFloat)), w.to(torch::kFloat)),
         "fp32: not taken");
  Expect(!DecodeLinearFits(torch::randn({16, 760}, bf), torch::randn({2304, 760}, bf)),
         "K = 760: not taken");
  Expect(!DecodeLinearFits(torch::randn({16, 768}, bf), torch::randn({2300, 768}, bf)),
         "N = 2300: not taken");
  Expect(!DecodeLinearFits(torch::randn({768, 16}, bf).t(), w), "a transposed x: not taken");
  bool refused = false;
  try {
    DecodeLinearOf(torch::randn({17, 768}, bf), w, torch::Tensor());
  } catch (const c10::Error& e) {
    refused = std::string(e.what()).find("decode_linear") != std::string::npos;
  }
  Expect(refused, "a call with 17 rows throws, naming decode_linear");
  return plain_test::Finish();
}
