// Chunked linear + cross-entropy with the gradient computed in the forward pass.
#include "payload/exec/linear_cross_entropy.h"

#include <algorithm>

#if HEADLAB_TORCH_CUDA
#include "kernels/torch/cross_entropy_op.h"
#endif

namespace headlab {
namespace {

// Rows per chunk: the chunk's fp32 row statistics and (off the kernel) its fp32 logits stay
// around 1 GiB.
int64_t ChunkRows(int64_t vocab) { return std::max<int64_t>(1, (int64_t(1) << 28) / vocab); }

// The dtype row statistics and accumulations use for logits in `dtype`: fp32, or fp64 for
// fp64 (tests take finite differences in fp64).
torch::ScalarType Accumulation(torch::ScalarType dtype) {
  return at::promote_types(dtype, torch::kFloat);
}

// Per-row loss of `logits` [n, V] (dtype) and, over them, the gradient softmax - one-hot.
torch::Tensor RowsInPlace(torch::Tensor& logits, const torch::Tensor& targets) {
#if HEADLAB_TORCH_CUDA
  if (logits.is_cuda() && logits.scalar_type() != torch::kDouble)
    return kernels::CrossEntropyRowsInPlace(logits, targets);
#endif
  torch::Tensor t = targets.unsqueeze(1);
  torch::Tensor log_p = torch::log_softmax(logits.to(Accumulation(logits.scalar_type())), 1);
  torch::Tensor loss = -log_p.gather(1, t).squeeze(1);
  torch::Tensor grad = log_p.exp_();
  grad.scatter_add_(1, t, -torch::ones({logits.size(0), 1}, grad.options()));
  logits.copy_(grad);
  return loss;
}

class LinearCrossEntropyFunction : public torch::autograd::Function<LinearCrossEntropyFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor h,
                               torch::Tensor w, torch::Tensor targets, int64_t dtype_code,
                               int64_t chunk_rows) {
    const auto dtype = static_cast<torch::ScalarType>(dtype_code);
    const int64_t n = h.size(0), vocab = w.size(0);
    const bool grads = h.requires_grad() || w.requires_grad();
    torch::Tensor hc = h.to(dtype), wc = w.to(dtype);
    const torch::ScalarType acc = Accumulation(dtype);
    torch::Tensor loss = torch::empty({n}, h.options().dtype(acc));
    torch::Tensor dh = grads ? torch::empty({n, h.size(1)}, hc.options()) : torch::Tensor();
    torch::Tensor dw =
        grads ? torch::zeros({vocab, w.size(1)}, w.options().dtype(acc)) : torch::Tensor();
    const int64_t chunk = chunk_rows > 0 ? chunk_rows : ChunkRows(vocab);
    for (int64_t start = 0; start < n; start += chunk) {
      const int64_t rows = std::min(chunk, n - start);
      torch::Tensor hs = hc.narrow(0, start, rows);
      torch::Tensor logits = at::mm(hs, wc.t());  // [rows, V] in dtype
      torch::Tensor part = loss.narrow(0, start, rows);
      part.copy_(RowsInPlace(logits, targets.narrow(0, start, rows)));
      if (!grads) continue;
      torch::Tensor dh_rows = dh.narrow(0, start, rows);
      at::mm_out(dh_rows, logits, wc);  // the rows' dh (before the 1 / N of the mean)
      dw.add_(at::mm(logits.t(), hs));  // their dw, accumulated in fp32 (fp64)
    }
    ctx->save_for_backward({dh, dw});
    ctx->saved_data["n"] = n;
    ctx->saved_data["h_dtype"] = static_cast<int64_t>(h.scalar_type());
    return loss.mean().to(acc);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &dh = saved[0], &dw = saved[1];
    const auto h_dtype = static_cast<torch::ScalarType>(ctx->saved_data["h_dtype"].toInt());
    const torch::ScalarType acc = dw.defined() ? dw.scalar_type() : torch::kFloat;
    const torch::Tensor scale = grads[0].to(acc) / double(ctx->saved_data["n"].toInt());
    torch::Tensor grad_h = dh.defined() ? (dh.to(acc) * scale).to(h_dtype) : torch::Tensor();
    torch::Tensor grad_w = dw.defined() ? dw * scale : torch::Tensor();
    return {grad_h, grad_w, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor LinearCrossEntropy(const torch::Tensor& h, const torch::Tensor& w,
                                 const torch::Tensor& targets, torch::ScalarType dtype,
                                 int64_t chunk_rows) {
  return LinearCrossEntropyFunction::apply(h, w, targets, static_cast<int64_t>(dtype), chunk_rows);
}

}  // namespace headlab
