// AAH §5.5-5.6: enriched inputs, f_base and the wide joint sibling scorer.
#include "payload/methods/aah/scorer.h"

#include <cmath>

namespace headlab::aah {

Vec EnrichedInput(const Vec& g, float eta, const Vec& parent, const Vec& level_mean,
                  float size_fraction) {
  // AAH §5.5: u = [g, eta_r, g - p, g - g_bar, s]; 9 + 1 + 9 + 9 + 1 = 29.
  Vec u;
  u.reserve(g.size() * 3 + 2);
  u.insert(u.end(), g.begin(), g.end());
  u.push_back(eta);
  for (size_t i = 0; i < g.size(); ++i) u.push_back(g[i] - parent[i]);
  for (size_t i = 0; i < g.size(); ++i) u.push_back(g[i] - level_mean[i]);
  u.push_back(size_fraction);
  return u;
}

float LevelCoordinate(int r, int levels) { return float(r) / float(std::max(1, levels - 1)); }

int Argmax(const float* z, int n) {
  int best = 0;
  for (int k = 1; k < n; ++k)
    if (z[k] > z[best]) best = k;
  return best;
}

Mlp::Mlp(int in, int hidden, int out, Rng* rng) : in_(in), hidden_(hidden), out_(out) {
  auto fill = [&](Vec* v, size_t n, int fan_in) {
    const double bound = 1.0 / std::sqrt(double(fan_in));
    v->resize(n);
    for (float& x : *v) x = float((2 * rng->Uniform() - 1) * bound);
  };
  fill(&w1_, size_t(hidden) * size_t(in), in);
  fill(&b1_, size_t(hidden), in);
  fill(&w2_, size_t(out) * size_t(hidden), hidden);
  fill(&b2_, size_t(out), hidden);
}

Vec Mlp::Forward(const Vec& x) const {
  Vec h(static_cast<size_t>(hidden_));
  for (int j = 0; j < hidden_; ++j) {
    double s = b1_[size_t(j)];
    const float* w = &w1_[size_t(j) * size_t(in_)];
    for (int i = 0; i < in_; ++i) s += double(w[i]) * x[size_t(i)];
    h[size_t(j)] = float(std::tanh(s));
  }
  Vec y(static_cast<size_t>(out_));
  for (int k = 0; k < out_; ++k) {
    double s = b2_[size_t(k)];
    const float* w = &w2_[size_t(k) * size_t(hidden_)];
    for (int j = 0; j < hidden_; ++j) s += double(w[j]) * h[size_t(j)];
    y[size_t(k)] = float(s);
  }
  return y;
}

Json Mlp::ToJson() const {
  return {{"in", in_}, {"hidden", hidden_}, {"out", out_}, {"w1", w1_},
          {"b1", b1_}, {"w2", w2_},         {"b2", b2_}};
}

Status Mlp::FromJson(const Json& j, const std::string& what) {
  try {
    if (j.at("in").get<int>() != in_ || j.at("hidden").get<int>() != hidden_ ||
        j.at("out").get<int>() != out_)
      return Status::Corruption(what + ": scorer shape " + j.at("in").dump() + "x" +
                                j.at("hidden").dump() + "x" + j.at("out").dump() +
                                " does not match this run's " + std::to_string(in_) + "x" +
                                std::to_string(hidden_) + "x" + std::to_string(out_));
    Vec w1 = j.at("w1").get<Vec>(), b1 = j.at("b1").get<Vec>();
    Vec w2 = j.at("w2").get<Vec>(), b2 = j.at("b2").get<Vec>();
    if (w1.size() != w1_.size() || b1.size() != b1_.size() || w2.size() != w2_.size() ||
        b2.size() != b2_.size())
      return Status::Corruption(what + ": scorer weight sizes do not match");
    w1_ = std::move(w1), b1_ = std::move(b1), w2_ = std::move(w2), b2_ = std::move(b2);
  } catch (const Json::exception& e) {
    return Status::Corruption(what + ": " + e.what());
  }
  return Status::Ok();
}

std::pair<Vec, Vec> JointSiblingScorer::Logits(const Vec& ua, const Vec& ub) const {
  // AAH §5.6: j_ab = [u_a, u_b, u_a - u_b, u_b - u_a]; [z_a, z_b] = reshape(f_joint(j), 2, K).
  Vec j;
  j.reserve(ua.size() * 4);
  j.insert(j.end(), ua.begin(), ua.end());
  j.insert(j.end(), ub.begin(), ub.end());
  for (size_t i = 0; i < ua.size(); ++i) j.push_back(ua[i] - ub[i]);
  for (size_t i = 0; i < ua.size(); ++i) j.push_back(ub[i] - ua[i]);
  Vec z = mlp_.Forward(j);
  return {Vec(z.begin(), z.begin() + k_), Vec(z.begin() + k_, z.end())};
}

}  // namespace headlab::aah
