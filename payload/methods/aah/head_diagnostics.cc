// AAH-v3's per-head attention diagnostics, dense and from log-normalisers.
#include "payload/methods/aah/head_diagnostics.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace headlab::aah {
namespace {

// Bytes of one chunk of [B, H, rows, T] attention probabilities in float32: the dense pass
// takes its queries in chunks of this size, so its memory does not grow with T^2.
constexpr int64_t kChunkBytes = int64_t(256) << 20;

// [H, 2] from per-head sums over the batch's `rows` queries.
torch::Tensor Means(const torch::Tensor& entropy, const torch::Tensor& norm, int64_t rows) {
  return torch::stack({entropy, norm}, 1) / double(rows);
}

}  // namespace

torch::Tensor AllowedKeyRows(const torch::Tensor& table, int64_t r0, int64_t r1, int64_t T) {
  auto opts = torch::dtype(torch::kLong).device(table.device());
  auto col = [&](int field) { return table[field].view({-1, 1, 1}); };
  torch::Tensor q = torch::arange(r0, r1, opts).view({1, -1, 1});
  torch::Tensor k = torch::arange(T, opts).view({1, 1, -1});
  torch::Tensor causal = k <= q;
  torch::Tensor in_window = (k > q - col(0)) | (col(3) == 0);
  torch::Tensor in_stream = (k < col(1)) | (q - k < col(2)) | (col(4) == 0);
  return causal & in_window & in_stream;
}

torch::Tensor DenseDiagnostics(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const torch::Tensor& table) {
  torch::NoGradGuard no_grad;
  const int64_t B = q.size(0), T = q.size(1), H = q.size(2), d = q.size(3);
  const int64_t group = H / k.size(2);
  // [B, H, T, d], each query head with its key/value head.
  torch::Tensor qr = q.transpose(1, 2);
  torch::Tensor kr = k.repeat_interleave(group, 2).transpose(1, 2);
  torch::Tensor vr = v.repeat_interleave(group, 2).transpose(1, 2);
  auto fopts = torch::dtype(torch::kFloat).device(q.device());
  torch::Tensor entropy = torch::zeros({H}, fopts), norm = torch::zeros({H}, fopts);
  const int64_t rows = std::max<int64_t>(1, kChunkBytes / (B * H * T * 4));
  for (int64_t r0 = 0; r0 < T; r0 += rows) {
    const int64_t r1 = std::min(T, r0 + rows);
    torch::Tensor allowed = AllowedKeyRows(table, r0, r1, T);
    torch::Tensor scores =
        torch::matmul(qr.narrow(2, r0, r1 - r0), kr.transpose(-2, -1)).to(torch::kFloat) /
        std::sqrt(double(d));
    scores = scores.masked_fill(allowed.logical_not().unsqueeze(0),
                                -std::numeric_limits<float>::infinity());
    torch::Tensor p = torch::softmax(scores, -1);              // [B, H, rows, T]
    torch::Tensor plogp = p * torch::log(p.clamp_min(1e-30));  // 0 where p = 0
    entropy -= plogp.sum(std::vector<int64_t>{0, 2, 3});
    norm += torch::matmul(p.to(vr.scalar_type()), vr)
                .to(torch::kFloat)
                .pow(2)
                .sum(-1)
                .sqrt()
                .sum(std::vector<int64_t>{0, 2});
  }
  return Means(entropy, norm, B * T);
}

torch::Tensor LseDiagnostics(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const AttendWithLse& attend) {
  torch::NoGradGuard no_grad;
  return OutputDiagnostics(q, k, attend(q, k, v).first, attend);
}

torch::Tensor OutputDiagnostics(const torch::Tensor& q, const torch::Tensor& k,
                                const torch::Tensor& o, const AttendWithLse& attend) {
  torch::NoGradGuard no_grad;
  const int64_t B = q.size(0), T = q.size(1), d = q.size(3);
  const double scale = 1.0 / std::sqrt(double(d));
  const std::vector<int64_t> kBatchQueries = {0, 1};
  auto [o_k, lse] = attend(q, k, k);  // sum_j p_ij k_j, and lse [B, H, T]
  torch::Tensor q_dot = (q.to(torch::kFloat) * o_k.to(torch::kFloat)).sum(-1);  // [B, T, H]
  torch::Tensor entropy = (lse.transpose(1, 2) - scale * q_dot).sum(kBatchQueries);
  torch::Tensor norm = o.to(torch::kFloat).pow(2).sum(-1).sqrt().sum(kBatchQueries);
  return Means(entropy, norm, B * T);
}

double HeadUsage(const HeadState& s, int64_t T) {
  int64_t keys = 0;  // the last query's (q = T - 1)
  switch (s.mode) {
    case HeadMode::kOrdinary:
      keys = T;
      break;
    case HeadMode::kLocal:  // q - W < k <= q
      keys = std::min(s.window, T);
      break;
    case HeadMode::kStreaming: {  // k < sink, or q - k < recent
      const int64_t sink = std::min(s.sink, T), recent = std::min(s.recent, T);
      keys = sink + recent - std::max<int64_t>(0, sink - (T - recent));
      break;
    }
    case HeadMode::kFixed:
    case HeadMode::kPruned:
      break;
  }
  return double(keys) / double(T);
}

}  // namespace headlab::aah
