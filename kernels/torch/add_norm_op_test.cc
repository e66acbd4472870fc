// add_norm_op_test.cc: the add + norm kernel (add_norm_op.h) against a float64 LibTorch
// reference written here from the definitions (not through the model's Norm): LayerNorm and
// RMSNorm, with and without the residual add, bf16/fp16/fp32 outputs, widths 768, 1000, 1022
// and 8192. The updated x must equal x + delta exactly (one fp32 add); y must be within 2x (+1e-6)
// the error of the float64 reference rounded to y's dtype (1e-5 relative L2 in fp32). Widths
// and row counts reach both kernels (one warp per row, one CTA per row) and their edges. Bad
// input is refused with an error naming it. Plain main (no Catch2 on the device); gpu label.
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>

#include "kernels/add_norm.h"  // kMaxAddNormWidth
#include "kernels/torch/add_norm_op.h"
#include "kernels/torch/plain_test.h"

namespace headlab {
namespace kernels {
namespace {

using plain_test::Expect;

double RelL2(const torch::Tensor& got, const torch::Tensor& want) {
  return (got.to(torch::kDouble) - want).norm().item<double>() /
         std::max(want.norm().item<double>(), 1e-30);
}

void Case(int64_t rows, int64_t width, bool rms, bool add, torch::ScalarType dtype) {
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  torch::Tensor x0 = torch::randn({rows, 1, width}, cuda.dtype(torch::kFloat)) * 3 + 0.5;
  torch::Tensor delta =
      add ? torch::randn({rows, 1, width}, cuda.dtype(torch::kBFloat16)) : torch::Tensor();
  torch::Tensor weight = torch::rand({width}, cuda.dtype(torch::kFloat)) + 0.5;
  torch::Tensor bias = rms ? torch::Tensor() : torch::randn({width}, cuda.dtype(torch::kFloat));
  const double eps = rms ? 1e-6 : 1e-5;
  torch::Tensor x = x0.clone();
  torch::Tensor y = AddNormInto(&x, delta, weight, bias, rms, eps, dtype);
  torch::Tensor want_x = add ? x0 + delta.to(torch::kFloat) : x0;
  // The definitions in float64.
  torch::Tensor r = want_x.to(torch::kDouble);
  torch::Tensor want;
  if (rms) {
    want = r * torch::rsqrt(r.pow(2).mean(-1, true) + eps) * weight.to(torch::kDouble);
  } else {
    torch::Tensor mean = r.mean(-1, true);
    torch::Tensor var = (r - mean).pow(2).mean(-1, true);
    want =
        (r - mean) * torch::rsqrt(var + eps) * weight.to(torch::kDouble) + bias.to(torch::kDouble);
  }
  const double err = RelL2(y, want);
  const double ref_err = RelL2(want.to(dtype), want);
  const double bound = dtype == torch::kFloat ? 1e-5 : 2 * ref_err + 1e-6;
  char what[200];
  std::snprintf(what, sizeof(what),
                "%s%s rows %lld width %lld -> %s: x exact %s, y rel L2 %.3g (bound %.3g)",
                rms ? "rmsnorm" : "layernorm", add ? " + add" : "", (long long)rows,
                (long long)width, std::string(c10::toString(dtype)).c_str(),
                torch::equal(x, want_x) ? "yes" : "NO", err, bound);
  Expect(torch::equal(x, want_x) && y.scalar_type() == dtype && err <= bound, what);
}

}  // namespace
}  // namespace kernels
}  // namespace headlab

int main() {
  using namespace headlab::kernels;
  if (!plain_test::CudaDevice()) return 1;
  torch::manual_seed(5);
  torch::NoGradGuard no_grad;
  // 16 rows (a decode step): the CTA-row kernel. 1000 rows: the warp-row kernel at widths 768
  // and 1000 (a lane's last vector past the row), the CTA-row kernel at 1022 (not in
  // 4-element vectors) and 8192.
  for (int64_t rows : {16, 1000})
    for (int64_t width : {768, 1000, 1022, 8192})
      for (bool rms : {false, true})
        for (bool add : {true, false})
          for (torch::ScalarType dt : {torch::kBFloat16, torch::kHalf, torch::kFloat})
            Case(rows, width, rms, add, dt);
  Case(517, 768, false, true, torch::kBFloat16);   // a last CTA of warp rows part-filled
  Case(8192, 768, false, true, torch::kBFloat16);  // a prefill chunk's rows (B 16 x 512 tokens)
  {  // bad input: a width past the kernel's rows, a non-contiguous x, a CPU tensor
    const auto cuda = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat);
    auto refused = [](const std::function<void()>& f, const char* word) {
      try {
        f();
      } catch (const c10::Error& e) {
        return std::string(e.what()).find(word) != std::string::npos;
      }
      return false;
    };
    torch::Tensor wide = torch::zeros({2, kMaxAddNormWidth + 1}, cuda),
                  w = torch::ones({kMaxAddNormWidth + 1}, cuda);
    Expect(refused([&] { AddNormInto(&wide, {}, w, {}, true, 1e-6, torch::kBFloat16); }, "width"),
           "a row wider than kMaxAddNormWidth is refused");
    torch::Tensor strided = torch::zeros({8, 16}, cuda).t(), w8 = torch::ones({8}, cuda);
    Expect(refused([&] { AddNormInto(&strided, {}, w8, {}, true, 1e-6, torch::kBFloat16); },
                   "contiguous"),
           "a non-contiguous x is refused");
    torch::Tensor host = torch::zeros({2, 8});
    Expect(refused([&] { AddNormInto(&host, {}, w8, {}, true, 1e-6, torch::kBFloat16); }, "CUDA"),
           "a CPU x is refused");
  }
  return plain_test::Finish();
}
