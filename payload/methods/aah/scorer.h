// The AAH-v3 window scorers (AAH §5.5-5.7): enriched controller inputs, the base scorer
// f_base and the wide joint sibling scorer f_joint, both small MLPs whose weights are
// seeded from the run seed and never trained (argmax is a stop-gradient policy, §5.7).
// Torch-free.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "payload/methods/aah/hierarchy.h"

namespace headlab::aah {

constexpr int kBaseFeatureDim = 9;                     // x_h (§5.3)
constexpr int kEnrichedDim = 3 * kBaseFeatureDim + 2;  // 29 (§5.5)
constexpr int kJointDim = 4 * kEnrichedDim;            // [u_a, u_b, u_a-u_b, u_b-u_a]

// Returns the enriched input u_i^(r) = [g_i, eta_r, g_i - p_i, g_i - g_bar, s_i] (AAH §5.5);
// pass parent = g at the top level (zero parent difference).
Vec EnrichedInput(const Vec& g, float eta, const Vec& parent, const Vec& level_mean,
                  float size_fraction);

// Returns eta_r = r / max(1, R - 1) (AAH §5.4).
float LevelCoordinate(int r, int levels);

// Returns the index of the largest entry (the first on ties).
int Argmax(const float* z, int n);

// A deterministic 64-bit generator for seeded state and the random controls; uniform
// draws use the top 53 bits so they are the same on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  double Uniform() { return double(gen_() >> 11) * (1.0 / 9007199254740992.0); }
  // Returns an integer in [0, n).
  int64_t Below(int64_t n) { return int64_t(Uniform() * double(n)) % n; }
  std::mt19937_64& gen() { return gen_; }
  const std::mt19937_64& gen() const { return gen_; }

 private:
  std::mt19937_64 gen_;
};

// Linear(in, hidden) -> tanh -> Linear(hidden, out), initialised like torch.nn.Linear
// (weights and biases U(-1/sqrt(fan_in), 1/sqrt(fan_in))) from `rng`.
class Mlp {
 public:
  Mlp() = default;
  Mlp(int in, int hidden, int out, Rng* rng);

  // Returns the `out` logits of x (x.size() == in).
  Vec Forward(const Vec& x) const;
  int in() const { return in_; }
  int out() const { return out_; }

  Json ToJson() const;
  // Restores what ToJson wrote; Corruption when shapes do not match this Mlp's.
  Status FromJson(const Json& j, const std::string& what);

 private:
  int in_ = 0, hidden_ = 0, out_ = 0;
  Vec w1_, b1_, w2_, b2_;  // row-major [hidden, in], [hidden], [out, hidden], [out]
};

// f_base: u (29) -> K logits for one item (AAH §5.6 (a)).
class BaseScorer {
 public:
  BaseScorer() = default;
  BaseScorer(int windows, int hidden, Rng* rng) : mlp_(kEnrichedDim, hidden, windows, rng) {}
  Vec Logits(const Vec& u) const { return mlp_.Forward(u); }
  Mlp& mlp() { return mlp_; }
  const Mlp& mlp() const { return mlp_; }

 private:
  Mlp mlp_;
};

// f_joint: the ordered sibling pair (a, b) -> [z_a, z_b] = reshape(f_joint(j_ab), 2, K) with
// j_ab = [u_a, u_b, u_a - u_b, u_b - u_a] (AAH §5.6). Order-sensitive: slot 0 is a's.
class JointSiblingScorer {
 public:
  JointSiblingScorer() = default;
  JointSiblingScorer(int windows, int hidden, Rng* rng)
      : k_(windows), mlp_(kJointDim, hidden, 2 * windows, rng) {}
  // Returns {z_a, z_b}.
  std::pair<Vec, Vec> Logits(const Vec& ua, const Vec& ub) const;
  Mlp& mlp() { return mlp_; }
  const Mlp& mlp() const { return mlp_; }

 private:
  int k_ = 0;
  Mlp mlp_;
};

}  // namespace headlab::aah
