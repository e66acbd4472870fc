// AAH §5.3 feature EMA and §5.8 resolution EMA.
#include "payload/methods/aah/ema.h"

#include <algorithm>
#include <cmath>

namespace headlab::aah {

const std::vector<Vec>& FeatureEma::Update(const std::vector<Vec>& x) {
  if (value_.empty() || value_.size() != x.size()) {
    value_ = x;  // x_bar_0 = x_0 (§5.3)
    return value_;
  }
  const float a = float(alpha_);
  for (size_t h = 0; h < x.size(); ++h)
    for (size_t i = 0; i < x[h].size(); ++i) value_[h][i] = a * value_[h][i] + (1 - a) * x[h][i];
  return value_;
}

Status FeatureEma::FromJson(const Json& j, const std::string& what) {
  try {
    value_ = j.get<std::vector<Vec>>();
  } catch (const Json::exception& e) {
    return Status::Corruption(what + ": feature EMA: " + e.what());
  }
  return Status::Ok();
}

const std::vector<int>& ResolutionEma::Update(const std::vector<int>& c) {
  for (size_t h = 0; h < index_.size() && h < c.size(); ++h) {
    // §5.8: round(beta c_tilde_{t-1} + (1 - beta) c_t), then clamp to the candidate range.
    // The running variant folds into its unrounded state instead of the rounded index.
    const double prev = running_ ? state_[h] : double(index_[h]);
    const double v = beta_ * prev + (1 - beta_) * c[h];
    index_[h] = std::clamp(int(std::lround(v)), 0, k_ - 1);
    state_[h] = running_ ? std::clamp(v, 0.0, double(k_ - 1)) : double(index_[h]);
  }
  return index_;
}

Json ResolutionEma::ToJson() const {
  if (!running_) return index_;
  return {{"index", index_}, {"state", state_}};
}

Status ResolutionEma::FromJson(const Json& j, const std::string& what) {
  try {
    if (running_ != j.is_object())
      return Status::Corruption(what + ": resolution EMA state was written by the other " +
                                "aah.resolution_state");
    std::vector<int> v = (running_ ? j.at("index") : j).get<std::vector<int>>();
    std::vector<double> s = running_ ? j.at("state").get<std::vector<double>>()
                                     : std::vector<double>(v.begin(), v.end());
    if (v.size() != index_.size() || s.size() != index_.size())
      return Status::Corruption(what + ": resolution EMA has " + std::to_string(v.size()) +
                                " heads, the model " + std::to_string(index_.size()));
    for (int& i : v) i = std::clamp(i, 0, k_ - 1);
    index_ = std::move(v);
    state_ = std::move(s);
  } catch (const Json::exception& e) {
    return Status::Corruption(what + ": resolution EMA: " + e.what());
  }
  return Status::Ok();
}

}  // namespace headlab::aah
