// hybrid_attention_op.cc: torch::autograd::Function over HybridAttentionForward/Backward.
// The kernels see raw pointers and strides; this file maps tensors onto them, takes the
// current CUDA stream and keeps O and lse for the backward pass.
#include "kernels/torch/hybrid_attention_op.h"

#include "kernels/torch/dtype.h"

#if HEADLAB_TORCH_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace headlab {
namespace kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

#if HEADLAB_TORCH_CUDA  // without CUDA the op only checks its inputs (CheckInputs)
TensorView View(const torch::Tensor& t) {
  return {t.data_ptr(), t.stride(0), t.stride(1), t.stride(2)};
}
#endif

void CheckInputs(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                 const HybridHeads& heads) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
              "hybrid attention: q, k, v must be (B, T, heads, d)");
  TORCH_CHECK(q.is_cuda() && k.is_cuda() && v.is_cuda(), "hybrid attention: CUDA tensors only");
  TORCH_CHECK(k.sizes() == v.sizes(), "hybrid attention: k and v shapes differ");
  TORCH_CHECK(q.size(0) == k.size(0) && q.size(1) == k.size(1) && q.size(3) == k.size(3),
              "hybrid attention: q and k disagree on B, T or d");
  TORCH_CHECK(q.scalar_type() == k.scalar_type() && q.scalar_type() == v.scalar_type(),
              "hybrid attention: q, k, v dtypes differ");
  TORCH_CHECK(q.stride(3) == 1 && k.stride(3) == 1 && v.stride(3) == 1,
              "hybrid attention: the last dimension must be contiguous");
  TORCH_CHECK(static_cast<int64_t>(heads.specs.size()) == q.size(2),
              "hybrid attention: one HeadSpec per query head");
  bool any_fixed = false;
  for (const HeadSpec& s : heads.specs) any_fixed |= s.state == HeadState::kFixed;
  if (!any_fixed) return;
  TORCH_CHECK(heads.prior_rows.empty() || heads.prior_rows.size() == heads.specs.size(),
              "hybrid attention: prior_rows must be empty or have one row per head");
  for (const torch::Tensor* t : {&heads.alpha, &heads.rho, &heads.log_z}) {
    TORCH_CHECK(t->defined() && t->dim() == 2 && t->scalar_type() == torch::kFloat &&
                    t->device() == q.device() && t->stride(1) == 1,
                "hybrid attention: fixed heads need fp32 [R, L] alpha, rho, log_z on q's device");
    TORCH_CHECK(t->size(1) >= q.size(1),
                "hybrid attention: alpha/rho/log_z must be [R, L] with L >= T");
    for (size_t h = 0; h < heads.specs.size(); ++h) {
      const int64_t row = heads.prior_rows.empty() ? int64_t(h) : heads.prior_rows[h];
      TORCH_CHECK(heads.specs[h].state != HeadState::kFixed || (row >= 0 && row < t->size(0)),
                  "hybrid attention: fixed head ", h, " reads prior row ", row, " of ", t->size(0));
    }
  }
}

#if HEADLAB_TORCH_CUDA
// The kernel's per-head specs, fixed heads pointing into rows of the prior tensors.
std::vector<HeadSpec> DeviceSpecs(const HybridHeads& heads) {
  std::vector<HeadSpec> out = heads.specs;
  for (size_t h = 0; h < out.size(); ++h) {
    if (out[h].state != HeadState::kFixed) {
      out[h].alpha = out[h].rho = out[h].log_z = nullptr;
      continue;
    }
    const int64_t row = heads.prior_rows.empty() ? int64_t(h) : heads.prior_rows[h];
    out[h].alpha = heads.alpha.data_ptr<float>() + row * heads.alpha.stride(0);
    out[h].rho = heads.rho.data_ptr<float>() + row * heads.rho.stride(0);
    out[h].log_z = heads.log_z.data_ptr<float>() + row * heads.log_z.stride(0);
  }
  return out;
}

AttentionShape Shape(const torch::Tensor& q, const torch::Tensor& k, double scale) {
  AttentionShape s;
  s.batch = static_cast<int>(q.size(0));
  s.seq_len = static_cast<int>(q.size(1));
  s.heads = static_cast<int>(q.size(2));
  s.kv_heads = static_cast<int>(k.size(2));
  s.head_dim = static_cast<int>(q.size(3));
  s.scale = static_cast<float>(scale);
  s.dtype = KernelDType(q.scalar_type(), "hybrid attention");
  return s;
}

void Check(KernelStatus st) { TORCH_CHECK(st.ok(), "hybrid attention kernel: ", st.message); }

void* CurrentStream(const torch::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}

// Returns t (B, T, heads, d) with zero columns appended up to head size `to` (a fresh
// contiguous tensor), or t itself when d == to.
torch::Tensor PadHeadDim(const torch::Tensor& t, int64_t to) {
  return t.size(3) == to ? t : torch::constant_pad_nd(t, {0, to - t.size(3)});
}

// Checks the inputs and launches the forward at the head size the kernels run
// (ExecutedHeadDim: d = 96 as 128 on Hopper). *q, *k, *v become the inputs as launched
// (zero-padded when padding), *o a fresh contiguous output of their head size and *lse fp32
// (B, H, T); `paths`, when given, receives the kernels' implementations.
void LaunchForward(torch::Tensor* q, torch::Tensor* k, torch::Tensor* v, const HybridHeads& heads,
                   double scale, KernelPaths* paths, torch::Tensor* o, torch::Tensor* lse) {
  CheckInputs(*q, *k, *v, heads);
  c10::cuda::CUDAGuard guard(q->device());
  const int64_t executed = ExecutedHeadDim(Shape(*q, *k, scale));
  *q = PadHeadDim(*q, executed);
  *k = PadHeadDim(*k, executed);
  *v = PadHeadDim(*v, executed);
  const std::vector<HeadSpec> specs = DeviceSpecs(heads);
  *o = torch::empty_like(*q, torch::MemoryFormat::Contiguous);
  *lse = torch::empty({q->size(0), q->size(2), q->size(1)}, q->options().dtype(torch::kFloat));
  ForwardArgs a;
  a.shape = Shape(*q, *k, scale);
  a.heads = specs.data();
  a.q = View(*q);
  a.k = View(*k);
  a.v = View(*v);
  a.o = View(*o);
  a.lse = lse->data_ptr<float>();
  if (paths) {
    paths->forward = ForwardPathName(a);
    BackwardArgs b;  // the backward's choice depends on the shape and the views' alignment
    b.shape = a.shape;
    b.heads = a.heads;
    b.q = a.q;
    b.k = a.k;
    b.v = a.v;
    b.o = b.d_o = b.dq = a.o;  // contiguous (B, T, H, d), as dO (made so) and dQ are
    b.dk = a.k;                // dK, dV are contiguous; K, V's alignment is checked anyway
    b.dv = a.v;
    paths->backward = BackwardPathName(b);
    paths->head_dim = int(executed);
  }
  Check(HybridAttentionForward(a, CurrentStream(*q)));
}

class HybridAttentionFunction : public torch::autograd::Function<HybridAttentionFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, torch::Tensor q, torch::Tensor k,
                               torch::Tensor v, const HybridHeads& heads, double scale,
                               KernelPaths* paths) {
    const int64_t d = q.size(3);
    torch::Tensor o, lse;
    LaunchForward(&q, &k, &v, heads, scale, paths, &o, &lse);
    ctx->save_for_backward({q, k, v, o, lse});  // as launched (padded when padding)
    // The specs travel as plain integers; the prior tensors by reference (no copy).
    std::vector<int64_t> flat;
    for (const HeadSpec& s : heads.specs) {
      flat.insert(flat.end(), {static_cast<int64_t>(s.state), s.window, s.sink, s.recent});
    }
    ctx->saved_data["specs"] = flat;
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["alpha"] = heads.alpha.defined() ? heads.alpha : torch::Tensor();
    ctx->saved_data["rho"] = heads.rho.defined() ? heads.rho : torch::Tensor();
    ctx->saved_data["log_z"] = heads.log_z.defined() ? heads.log_z : torch::Tensor();
    ctx->saved_data["prior_rows"] = heads.prior_rows;
    return o.size(3) == d ? o : o.narrow(3, 0, d);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &o = saved[3], &lse = saved[4];
    c10::cuda::CUDAGuard guard(q.device());
    HybridHeads heads;
    const std::vector<int64_t> flat = ctx->saved_data["specs"].toIntVector();
    for (size_t i = 0; i + 3 < flat.size(); i += 4) {
      HeadSpec s;
      s.state = static_cast<HeadState>(flat[i]);
      s.window = static_cast<int32_t>(flat[i + 1]);
      s.sink = static_cast<int32_t>(flat[i + 2]);
      s.recent = static_cast<int32_t>(flat[i + 3]);
      heads.specs.push_back(s);
    }
    heads.alpha = ctx->saved_data["alpha"].toTensor();
    heads.rho = ctx->saved_data["rho"].toTensor();
    heads.log_z = ctx->saved_data["log_z"].toTensor();
    heads.prior_rows = ctx->saved_data["prior_rows"].toIntVector();
    const double scale = ctx->saved_data["scale"].toDouble();
    const std::vector<HeadSpec> specs = DeviceSpecs(heads);

    // dO gets the forward's padding (zero columns: O's padded columns are zero, so
    // rowsum(dO o O) is unchanged); the gradients are returned at the caller's head size.
    const int64_t d = grads[0].size(3);
    torch::Tensor d_o = PadHeadDim(grads[0], q.size(3));
    if (d_o.stride(3) != 1) d_o = d_o.contiguous();
    torch::Tensor dq = torch::empty_like(q, torch::MemoryFormat::Contiguous);
    torch::Tensor dk = torch::empty_like(k, torch::MemoryFormat::Contiguous);
    torch::Tensor dv = torch::empty_like(v, torch::MemoryFormat::Contiguous);
    BackwardArgs a;
    a.shape = Shape(q, k, scale);
    a.heads = specs.data();
    a.q = View(q);
    a.k = View(k);
    a.v = View(v);
    a.o = View(o);
    a.d_o = View(d_o);
    a.lse = lse.data_ptr<float>();
    a.dq = View(dq);
    a.dk = View(dk);
    a.dv = View(dv);
    torch::Tensor workspace = torch::empty({static_cast<int64_t>(BackwardWorkspaceBytes(a.shape))},
                                           q.options().dtype(torch::kUInt8));
    a.workspace = workspace.data_ptr();
    Check(HybridAttentionBackward(a, CurrentStream(q)));
    if (q.size(3) != d) {
      dq = dq.narrow(3, 0, d);
      dk = dk.narrow(3, 0, d);
      dv = dv.narrow(3, 0, d);
    }
    return {dq, dk, dv, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};
#endif  // HEADLAB_TORCH_CUDA

}  // namespace

bool HybridAttentionAvailable() {
#if HEADLAB_TORCH_CUDA
  return true;
#else
  return false;
#endif
}

torch::Tensor HybridAttention(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v, const HybridHeads& heads, double scale,
                              KernelPaths* paths) {
#if HEADLAB_TORCH_CUDA
  return HybridAttentionFunction::apply(q, k, v, heads, scale, paths);
#else
  (void)paths;
  (void)scale;
  CheckInputs(q, k, v, heads);  // a CPU tensor fails here with "CUDA tensors only"
  TORCH_CHECK(false, "hybrid attention: this build has no CUDA LibTorch; use the dense reference");
  return torch::Tensor();
#endif
}

std::pair<torch::Tensor, torch::Tensor> HybridAttentionWithLse(const torch::Tensor& q,
                                                               const torch::Tensor& k,
                                                               const torch::Tensor& v,
                                                               const HybridHeads& heads,
                                                               double scale) {
#if HEADLAB_TORCH_CUDA
  torch::NoGradGuard no_grad;
  torch::Tensor qx = q, kx = k, vx = v, o, lse;
  LaunchForward(&qx, &kx, &vx, heads, scale, nullptr, &o, &lse);
  return {o.size(3) == q.size(3) ? o : o.narrow(3, 0, q.size(3)), lse};
#else
  (void)scale;
  CheckInputs(q, k, v, heads);
  TORCH_CHECK(false, "hybrid attention: this build has no CUDA LibTorch; use the dense reference");
  return {};
#endif
}

}  // namespace kernels
}  // namespace headlab
