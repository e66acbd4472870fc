// reference.cc: dense double-accumulation reference of the hybrid-head layer. Work is split
// over (batch, KV group) so GQA gradient sums need no locks.
#include "kernels/reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "kernels/head_mask.h"

namespace headlab {
namespace kernels {
namespace {

uint32_t FloatBits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

float BitsFloat(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// fp32 -> bf16 -> fp32, round to nearest even (NaN kept).
float RoundBF16(float x) {
  if (std::isnan(x)) return x;
  uint32_t u = FloatBits(x);
  u += 0x7fffu + ((u >> 16) & 1u);
  return BitsFloat(u & 0xffff0000u);
}

// fp32 -> fp16 -> fp32, round to nearest even, saturating to inf like the hardware.
float RoundF16(float x) {
  if (std::isnan(x) || std::isinf(x) || x == 0.f) return x;
  float ax = std::fabs(x);
  if (ax >= 65520.f) return std::copysign(std::numeric_limits<float>::infinity(), x);
  int e;
  std::frexp(ax, &e);                    // ax = m * 2^e, m in [0.5, 1)
  int exp_unit = std::max(e - 11, -24);  // 11 significant bits; subnormals step 2^-24
  float unit = std::ldexp(1.f, exp_unit);
  float q = std::nearbyint(ax / unit) * unit;  // default rounding mode: to nearest even
  return std::copysign(q, x);
}

// Runs fn(b, g) for every batch element and KV group on all hardware threads.
template <typename Fn>
void ParallelOverGroups(int batch, int groups, Fn fn) {
  int jobs = batch * groups;
  int n = std::max(1, std::min<int>(jobs, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int w = 0; w < n; ++w) {
    pool.emplace_back([&, w] {
      for (int j = w; j < jobs; j += n) fn(j / groups, j % groups);
    });
  }
  for (auto& t : pool) t.join();
}

// The probabilities of row i of head h (batch b), in the rounding of `r`. Returns lse.
double ProbabilityRow(const ReferenceProblem& p, Rounding r, int b, int h, int i,
                      std::vector<double>* prob) {
  const AttentionShape& s = p.shape;
  const HeadSpec& hs = p.heads[h];
  const int T = s.seq_len, H = s.heads, G = s.kv_heads, d = s.head_dim;
  const int g = h / (H / G);
  prob->assign(T, 0.0);
  if (hs.state == HeadState::kPruned) return -std::numeric_limits<double>::infinity();
  if (hs.state == HeadState::kFixed) {  // SAF eq. 3
    for (int j = 0; j <= i; ++j) {
      (*prob)[j] = RoundTo(
          static_cast<float>(std::exp(double(hs.alpha[j]) + hs.rho[i - j] - hs.log_z[i])), r);
    }
    return hs.log_z[i];
  }
  const float* qi = p.q + ((size_t(b) * T + i) * H + h) * d;
  double mx = -std::numeric_limits<double>::infinity();
  for (int j = 0; j <= i; ++j) {
    if (!KeyVisible(hs.state, hs.window, hs.sink, hs.recent, i, j)) continue;
    const float* kj = p.k + ((size_t(b) * T + j) * G + g) * d;
    double dot = 0;
    for (int c = 0; c < d; ++c) dot += double(qi[c]) * kj[c];
    double sc = r == Rounding::kNone ? dot * s.scale : RoundTo(RoundTo(float(dot), r) * s.scale, r);
    (*prob)[j] = sc;
    mx = std::max(mx, sc);
  }
  double sum = 0;
  for (int j = 0; j <= i; ++j) {
    if (!KeyVisible(hs.state, hs.window, hs.sink, hs.recent, i, j)) continue;
    sum += std::exp((*prob)[j] - mx);
  }
  for (int j = 0; j <= i; ++j) {
    if (!KeyVisible(hs.state, hs.window, hs.sink, hs.recent, i, j)) continue;
    (*prob)[j] = RoundTo(float(std::exp((*prob)[j] - mx) / sum), r);
  }
  return mx + std::log(sum);
}

}  // namespace

float RoundTo(float x, Rounding r) {
  switch (r) {
    case Rounding::kBF16:
      return RoundBF16(x);
    case Rounding::kF16:
      return RoundF16(x);
    default:
      return x;
  }
}

void ReferenceForward(const ReferenceProblem& p, Rounding r, std::vector<float>* o,
                      std::vector<float>* lse) {
  const AttentionShape& s = p.shape;
  const int B = s.batch, T = s.seq_len, H = s.heads, G = s.kv_heads, d = s.head_dim;
  o->assign(size_t(B) * T * H * d, 0.f);
  lse->assign(size_t(B) * H * T, 0.f);
  ParallelOverGroups(B, G, [&](int b, int g) {
    std::vector<double> prob, acc(d);
    for (int h = g * (H / G); h < (g + 1) * (H / G); ++h) {
      for (int i = 0; i < T; ++i) {
        (*lse)[(size_t(b) * H + h) * T + i] = float(ProbabilityRow(p, r, b, h, i, &prob));
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int j = 0; j <= i; ++j) {
          if (prob[j] == 0.0) continue;
          const float* vj = p.v + ((size_t(b) * T + j) * G + g) * d;
          for (int c = 0; c < d; ++c) acc[c] += prob[j] * vj[c];
        }
        float* oi = o->data() + ((size_t(b) * T + i) * H + h) * d;
        for (int c = 0; c < d; ++c) oi[c] = RoundTo(float(acc[c]), r);
      }
    }
  });
}

void ReferenceBackward(const ReferenceProblem& p, const float* d_o, Rounding r,
                       std::vector<float>* dq, std::vector<float>* dk, std::vector<float>* dv) {
  const AttentionShape& s = p.shape;
  const int B = s.batch, T = s.seq_len, H = s.heads, G = s.kv_heads, d = s.head_dim;
  dq->assign(size_t(B) * T * H * d, 0.f);
  dk->assign(size_t(B) * T * G * d, 0.f);
  dv->assign(size_t(B) * T * G * d, 0.f);
  ParallelOverGroups(B, G, [&](int b, int g) {
    std::vector<double> prob, dprob(T), dk_acc(size_t(T) * d, 0.0), dv_acc(size_t(T) * d, 0.0),
        dq_acc(d);
    for (int h = g * (H / G); h < (g + 1) * (H / G); ++h) {
      const HeadState state = p.heads[h].state;
      if (state == HeadState::kPruned) continue;
      for (int i = 0; i < T; ++i) {
        ProbabilityRow(p, r, b, h, i, &prob);
        const float* doi = d_o + ((size_t(b) * T + i) * H + h) * d;
        for (int j = 0; j <= i; ++j) {  // dV += P^T dO (every non-pruned head)
          if (prob[j] == 0.0) continue;
          for (int c = 0; c < d; ++c) dv_acc[size_t(j) * d + c] += prob[j] * doi[c];
        }
        if (state == HeadState::kFixed) continue;  // no Q/K work for fixed heads
        double rowsum = 0;                         // D_i = sum_j P_ij dP_ij
        for (int j = 0; j <= i; ++j) {
          dprob[j] = 0;
          if (prob[j] == 0.0) continue;
          const float* vj = p.v + ((size_t(b) * T + j) * G + g) * d;
          double dot = 0;
          for (int c = 0; c < d; ++c) dot += double(doi[c]) * vj[c];
          dprob[j] = RoundTo(float(dot), r);
          rowsum += prob[j] * dprob[j];
        }
        const float* qi = p.q + ((size_t(b) * T + i) * H + h) * d;
        std::fill(dq_acc.begin(), dq_acc.end(), 0.0);
        for (int j = 0; j <= i; ++j) {
          if (prob[j] == 0.0) continue;
          double ds = RoundTo(float(prob[j] * (dprob[j] - rowsum)), r);
          ds = RoundTo(float(ds * s.scale), r);
          const float* kj = p.k + ((size_t(b) * T + j) * G + g) * d;
          for (int c = 0; c < d; ++c) {
            dq_acc[c] += ds * kj[c];
            dk_acc[size_t(j) * d + c] += ds * qi[c];
          }
        }
        float* dqi = dq->data() + ((size_t(b) * T + i) * H + h) * d;
        for (int c = 0; c < d; ++c) dqi[c] = RoundTo(float(dq_acc[c]), r);
      }
    }
    for (int j = 0; j < T; ++j) {
      for (int c = 0; c < d; ++c) {
        size_t at = ((size_t(b) * T + j) * G + g) * d + c;
        (*dk)[at] = RoundTo(float(dk_acc[size_t(j) * d + c]), r);
        (*dv)[at] = RoundTo(float(dv_acc[size_t(j) * d + c]), r);
      }
    }
  });
}

void FixedLogZ(const float* alpha, const float* rho, int T, float* log_z) {
  for (int i = 0; i < T; ++i) {
    double mx = -std::numeric_limits<double>::infinity();
    for (int k = 0; k <= i; ++k) mx = std::max(mx, double(alpha[k]) + rho[i - k]);
    double sum = 0;
    for (int k = 0; k <= i; ++k) sum += std::exp(double(alpha[k]) + rho[i - k] - mx);
    log_z[i] = float(mx + std::log(sum));
  }
}

double RelativeL2(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    double diff = double(a[i]) - b[i];
    num += diff * diff;
    den += double(b[i]) * b[i];
  }
  if (std::isnan(num)) return std::numeric_limits<double>::infinity();
  return std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
}

}  // namespace kernels
}  // namespace headlab
