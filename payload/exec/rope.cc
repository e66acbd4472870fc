// RoPE frequencies: plain, Llama 3.1's rescaling and YaRN's.
#include "payload/exec/rope.h"

#include <algorithm>
#include <cmath>

namespace headlab {
namespace {

constexpr double kTwoPi = 6.283185307179586;

// Llama 3.1 (the "llama3" rope_type of its config.json): wavelengths shorter than
// L / high_freq_factor keep their frequency, those longer than L / low_freq_factor are
// interpolated by s, and the band between blends the two linearly in L / wavelength.
double Llama3(double theta, const RopeScaling& s) {
  const double wavelength = kTwoPi / theta, L = double(s.original_context);
  if (wavelength < L / s.high_freq_factor) return theta;
  if (wavelength > L / s.low_freq_factor) return theta / s.factor;
  const double smooth =
      (L / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  return (1 - smooth) * theta / s.factor + smooth * theta;
}

// The pair index i at which theta_i turns `rotations` times over the original context L:
// L theta_i / 2pi = rotations, theta_i = base^(-2i/d) (YaRN eq. 17 solved for the index).
double CorrectionIndex(double rotations, int64_t d, double base, double L) {
  return double(d) * std::log(L / (rotations * kTwoPi)) / (2 * std::log(base));
}

}  // namespace

std::vector<double> RopeFrequencies(const RopeSpec& rope, int64_t head_dim) {
  const int64_t half = head_dim / 2;
  const RopeScaling& s = rope.scaling;
  // YaRN eq. 18 ("NTK-by-parts") as its reference implementation evaluates it, which the
  // checkpoints that name it were tuned with: the ramp gamma runs linearly over the pair
  // index between the indices where a pair turns beta_fast and beta_slow times over L
  // (rounded outward), not linearly in the rotation count; pairs below it keep theta_i,
  // pairs above it take theta_i / s.
  double low = 0, high = 1;
  if (s.type == "yarn") {
    const double L = double(s.original_context);
    low = std::max(std::floor(CorrectionIndex(s.beta_fast, head_dim, rope.base, L)), 0.0);
    high = std::min(std::ceil(CorrectionIndex(s.beta_slow, head_dim, rope.base, L)),
                    double(head_dim - 1));
    if (low == high) high += 0.001;  // a one-index ramp, not a division by zero
  }
  std::vector<double> theta(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const double t = std::pow(rope.base, -2.0 * double(i) / double(head_dim));  // RoFormer eq. 34
    if (s.type == "llama3") {
      theta[size_t(i)] = Llama3(t, s);
    } else if (s.type == "yarn") {
      const double gamma =
          std::clamp((double(i) - low) / (high - low), 0.0, 1.0);  // 1 = interpolate
      theta[size_t(i)] = gamma * t / s.factor + (1 - gamma) * t;
    } else {
      theta[size_t(i)] = t;
    }
  }
  return theta;
}

double RopeAttentionFactor(const RopeSpec& rope) {
  const RopeScaling& s = rope.scaling;
  if (s.type != "yarn") return 1.0;
  if (s.attention_factor > 0) return s.attention_factor;
  return s.factor <= 1 ? 1.0 : 0.1 * std::log(s.factor) + 1.0;  // YaRN eq. 22: sqrt(1/t)
}

}  // namespace headlab
