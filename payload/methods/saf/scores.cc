// SAF head scores without tensors: output-aware scores, gradient EMA, rank combinations.
#include "payload/methods/saf/scores.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>

#include "payload/methods/saf/saf_schema.h"

namespace headlab::saf {
namespace {

static_assert(std::size(kScoreNames) == size_t(ScoreKind::kRandomGlobal) + 1);

std::vector<double> PerRow(const std::vector<double>& sums, int64_t rows) {
  std::vector<double> out(sums.size(), 0.0);
  if (rows <= 0) return out;
  for (size_t u = 0; u < sums.size(); ++u) out[u] = sums[u] / double(rows);
  return out;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

}  // namespace

const char* ScoreKindName(ScoreKind k) { return kScoreNames[int(k)]; }

StatusOr<ScoreKind> ParseScoreKind(const std::string& name) {
  return ParseNamed<ScoreKind>(kScoreNames, name, "SAF score");
}

bool NeedsOutputPass(ScoreKind k) {
  return k == ScoreKind::kMagnitude || k == ScoreKind::kRedundancy ||
         k == ScoreKind::kResidualCos || k == ScoreKind::kResidualRel;
}

bool NeedsGradientEma(ScoreKind k) {
  return k == ScoreKind::kGradient || k == ScoreKind::kRankSum || k == ScoreKind::kGradientVeto;
}

std::vector<double> NormalizeGateTaylor(const std::vector<double>& importance, int64_t heads) {
  std::vector<double> out(importance.size(), 0.0);
  for (size_t l = 0; l * size_t(heads) < importance.size(); ++l) {
    double sq = 0;
    for (int64_t h = 0; h < heads; ++h)
      sq += importance[l * size_t(heads) + size_t(h)] * importance[l * size_t(heads) + size_t(h)];
    if (sq <= 0) continue;  // zero-norm layers score 0
    for (int64_t h = 0; h < heads; ++h)
      out[l * size_t(heads) + size_t(h)] =
          importance[l * size_t(heads) + size_t(h)] / std::sqrt(sq);
  }
  return out;
}

std::vector<double> MagnitudeScores(const OutputStats& s) {
  std::vector<double> out(s.sq_norm.size(), 0.0);
  for (size_t u = 0; u < out.size(); ++u)
    out[u] = s.dims[u] > 0 ? std::sqrt(s.sq_norm[u] / double(s.dims[u])) : 0.0;
  return out;
}

std::vector<double> RedundancyScores(const OutputStats& s) {
  const int64_t H = s.heads;
  std::vector<double> out(size_t(s.layers * H), 0.0);
  for (int64_t l = 0; l < s.layers; ++l)
    for (int64_t h = 0; h < H; ++h) {
      auto g = [&](int64_t a, int64_t b) { return s.gram[size_t((l * H + a) * H + b)]; };
      double best = -1.0;  // max over h' != h of the cosine
      bool any = false;
      for (int64_t o = 0; o < H; ++o) {
        if (o == h) continue;
        double den = std::sqrt(g(h, h)) * std::sqrt(g(o, o));
        double cos = den > 0 ? g(h, o) / den : 0.0;
        best = any ? std::max(best, cos) : cos;
        any = true;
      }
      out[size_t(l * H + h)] = any ? -best : 0.0;  // SAF eq. 10
    }
  return out;
}

std::vector<double> ResidualCosScores(const OutputStats& s) { return PerRow(s.cos_sum, s.rows); }

std::vector<double> ResidualRelScores(const OutputStats& s) { return PerRow(s.rel_sum, s.rows); }

void GradientEma::Update(const std::vector<double>& q) {
  double mean = q.empty() ? 0.0 : std::accumulate(q.begin(), q.end(), 0.0) / double(q.size());
  std::vector<double> x(q.size(), 0.0);
  for (size_t u = 0; u < q.size(); ++u) x[u] = mean > 0 ? q[u] / mean : 0.0;  // eq. 8's q / q_bar
  if (updates_ == 0) {
    s_ = x;  // s(1) = q(1) / q_bar(1)
  } else {
    for (size_t u = 0; u < x.size(); ++u) s_[u] = beta_ * s_[u] + (1 - beta_) * x[u];  // eq. 9
  }
  ++updates_;
}

std::vector<int64_t> IncreasingOrder(const std::vector<double>& s) {
  std::vector<int64_t> order(s.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return s[size_t(a)] < s[size_t(b)]; });
  return order;
}

std::vector<double> Ranks(const std::vector<double>& s) {
  std::vector<double> r(s.size(), 0.0);
  std::vector<int64_t> order = IncreasingOrder(s);
  for (size_t k = 0; k < order.size(); ++k) r[size_t(order[k])] = double(k);
  return r;
}

std::vector<double> RankSumScores(const std::vector<double>& var, const std::vector<double>& grad) {
  std::vector<double> a = Ranks(var), b = Ranks(grad), out(var.size());
  for (size_t u = 0; u < out.size(); ++u) out[u] = a[u] + b[u];
  return out;
}

std::vector<int64_t> GradientVetoOrder(const std::vector<double>& var,
                                       const std::vector<double>& grad) {
  const double median = Median(grad);
  std::vector<int64_t> kept, vetoed;
  for (int64_t u : IncreasingOrder(var)) (grad[size_t(u)] > median ? vetoed : kept).push_back(u);
  kept.insert(kept.end(), vetoed.begin(), vetoed.end());
  return kept;
}

}  // namespace headlab::saf
