// hybrid_attention_op_test.cc: the LibTorch op against a dense float64 LibTorch reference
// (mixed ordinary/fixed/local/streaming/pruned heads, GQA, an unaligned T) on CUDA, forward
// and gradients; fixed heads' dQ exactly zero; CPU tensors refused with a clear error. A
// plain main so the device machine needs no Catch2; built only with CUDA LibTorch (gpu).
#include <cmath>
#include <cstdio>
#include <string>

#include "kernels/torch/hybrid_attention_op.h"
#include "kernels/torch/plain_test.h"

namespace headlab {
namespace kernels {
namespace {

using plain_test::Expect;

// Dense reference: every head's P as a (B, T, T) float64 matrix, O = P V.
torch::Tensor Reference(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const HybridHeads& heads, double scale) {
  const int64_t T = q.size(1), H = q.size(2), G = k.size(2);
  auto opts = q.options();
  torch::Tensor i = torch::arange(T, opts.dtype(torch::kLong)).unsqueeze(1);
  torch::Tensor j = torch::arange(T, opts.dtype(torch::kLong)).unsqueeze(0);
  std::vector<torch::Tensor> outs;
  for (int64_t h = 0; h < H; ++h) {
    const HeadSpec& s = heads.specs[h];
    const int64_t g = h / (H / G);
    torch::Tensor qh = q.select(2, h), kh = k.select(2, g), vh = v.select(2, g);
    torch::Tensor visible = j <= i;
    if (s.state == HeadState::kLocal) visible = visible & (j > i - s.window);
    if (s.state == HeadState::kStreaming) visible = visible & ((j < s.sink) | (j > i - s.recent));
    torch::Tensor p;
    if (s.state == HeadState::kPruned) {
      p = torch::zeros({q.size(0), T, T}, opts);
    } else if (s.state == HeadState::kFixed) {  // SAF eq. 3
      torch::Tensor a = heads.alpha[h].narrow(0, 0, T).to(opts.dtype());
      torch::Tensor r = heads.rho[h].to(opts.dtype()).index({(i - j).clamp_min(0)});
      torch::Tensor z = heads.log_z[h].narrow(0, 0, T).to(opts.dtype()).unsqueeze(1);
      p = (torch::exp(a.unsqueeze(0) + r - z) * visible).unsqueeze(0).expand({q.size(0), T, T});
    } else {
      torch::Tensor sc = torch::matmul(qh, kh.transpose(1, 2)) * scale;
      p = torch::softmax(sc.masked_fill(~visible, -INFINITY), -1);
    }
    outs.push_back(torch::matmul(p, vh));
  }
  return torch::stack(outs, 2);
}

double RelL2(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a.to(torch::kDouble) - b.to(torch::kDouble)).norm() /
          b.to(torch::kDouble).norm().clamp_min(1e-30))
      .item<double>();
}

void RunCuda(torch::Dtype dtype, double tol) {
  const int64_t B = 2, T = 97, H = 5, G = 5, d = 64, L = 128;
  torch::manual_seed(7);
  auto dev = torch::TensorOptions().device(torch::kCUDA);
  // q, k, v as slices of one packed projection output (non-contiguous views).
  torch::Tensor qkv = torch::randn({B, T, H + 2 * G, d}, dev.dtype(dtype));
  torch::Tensor q = qkv.narrow(2, 0, H), k = qkv.narrow(2, H, G), v = qkv.narrow(2, H + G, G);
  HybridHeads heads;
  heads.specs.resize(H);
  heads.specs[1].state = HeadState::kFixed;
  heads.specs[2].state = HeadState::kLocal;
  heads.specs[2].window = 17;
  heads.specs[3].state = HeadState::kStreaming;
  heads.specs[3].sink = 4;
  heads.specs[3].recent = 9;
  heads.specs[4].state = HeadState::kPruned;
  heads.alpha = torch::randn({H, L}, dev.dtype(torch::kFloat));
  heads.rho = torch::randn({H, L}, dev.dtype(torch::kFloat)) -
              0.02 * torch::arange(L, dev.dtype(torch::kFloat));
  // log Z(i) = logsumexp_{k<=i} alpha[k] + rho[i-k]
  {
    torch::Tensor i = torch::arange(L, dev.dtype(torch::kLong)).unsqueeze(1);
    torch::Tensor j = torch::arange(L, dev.dtype(torch::kLong)).unsqueeze(0);
    torch::Tensor e =
        heads.alpha.to(torch::kDouble).unsqueeze(1) +
        heads.rho.to(torch::kDouble).index({torch::indexing::Slice(), (i - j).clamp_min(0)});
    e = e.masked_fill(~(j <= i).unsqueeze(0), -INFINITY);
    heads.log_z = torch::logsumexp(e, -1).to(torch::kFloat).contiguous();
  }
  const double scale = 1.0 / std::sqrt(double(d));
  torch::Tensor qg = q.detach().requires_grad_(true), kg = k.detach().requires_grad_(true),
                vg = v.detach().requires_grad_(true);
  torch::Tensor o = HybridAttention(qg, kg, vg, heads, scale);
  torch::Tensor d_o = torch::randn_like(o);
  auto grads = torch::autograd::grad({o}, {qg, kg, vg}, {d_o});

  torch::Tensor qr = q.detach().to(torch::kDouble).requires_grad_(true);
  torch::Tensor kr = k.detach().to(torch::kDouble).requires_grad_(true);
  torch::Tensor vr = v.detach().to(torch::kDouble).requires_grad_(true);
  torch::Tensor o_ref = Reference(qr, kr, vr, heads, scale);
  auto ref_grads = torch::autograd::grad({o_ref}, {qr, kr, vr}, {d_o.to(torch::kDouble)});
  const char* name = dtype == torch::kFloat ? "fp32" : "bf16";
  const double eo = RelL2(o, o_ref), eq = RelL2(grads[0], ref_grads[0]),
               ek = RelL2(grads[1], ref_grads[1]), ev = RelL2(grads[2], ref_grads[2]);
  char line[256];
  std::snprintf(line, sizeof(line),
                "%s vs float64 reference: o %.2e dq %.2e dk %.2e dv %.2e (tol %.0e)", name, eo, eq,
                ek, ev, tol);
  Expect(eo <= tol && eq <= tol && ek <= tol && ev <= tol, line);
  Expect(grads[0].select(2, 1).eq(0).all().item<bool>(),
         std::string(name) + " fixed head dQ exactly zero");
  Expect(grads[0].select(2, 4).eq(0).all().item<bool>(),
         std::string(name) + " pruned head dQ exactly zero");
  Expect(o.select(2, 4).eq(0).all().item<bool>(),
         std::string(name) + " pruned head output exactly zero");
}

}  // namespace
}  // namespace kernels
}  // namespace headlab

int main() {
  using namespace headlab::kernels;
  {  // Bad input is refused with a clear error, never launched.
    torch::Tensor cpu = torch::randn({1, 8, 2, 64});
    HybridHeads heads;
    heads.specs.resize(2);
    std::string message;
    try {
      HybridAttention(cpu, cpu, cpu, heads, 0.125);
    } catch (const c10::Error& e) {
      message = e.what();
    }
    Expect(message.find("CUDA") != std::string::npos,
           "CPU tensors refused: " + message.substr(0, message.find('\n')));
  }
  if (!HybridAttentionAvailable() || !torch::cuda::is_available()) {
    std::printf("no CUDA LibTorch or device: only the refusal was checked\n");
  } else {
    RunCuda(torch::kFloat, 1e-5);
    RunCuda(torch::kBFloat16, 2e-2);
  }
  return plain_test::Finish();
}
