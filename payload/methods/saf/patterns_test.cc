#include "payload/methods/saf/patterns.h"

#include "payload/exec/attention.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::saf {
namespace {

constexpr int64_t kT = 24, kN = 12;

// Calibration statistics of one head over kN random inputs whose logits share a positional
// bias plus content noise, and the inputs themselves ([N, T, T]).
struct Calibrated {
  CalibrationStats stats{1, 1, CalibrationNeeds{true, true}};
  torch::Tensor att;
};
Calibrated MakeCalibrated() {
  torch::manual_seed(21);
  Calibrated c;
  torch::Tensor bias = torch::randn({kT, kT}) * 2;
  torch::Tensor s = bias.unsqueeze(0) + torch::randn({kN, kT, kT});
  torch::Tensor future = torch::ones({kT, kT}, torch::kBool).triu(1);
  s = s.masked_fill(future, -INFINITY);
  c.att = torch::softmax(s, -1);
  for (int64_t n = 0; n < kN; n += 3)
    c.stats.Add(0, c.att.narrow(0, n, 3).unsqueeze(1), s.narrow(0, n, 3).unsqueeze(1));
  return c;
}

// SAF eq. 13 on the calibration inputs: (1 / (N T^2)) sum_n ||A_n - P||_F^2.
double ReconstructionError(const torch::Tensor& att, const torch::Tensor& p) {
  return (att.to(torch::kFloat64) - p.to(torch::kFloat64)).pow(2).sum().item<double>() /
         double(att.size(0) * kT * kT);
}

void CheckCausalRowStochastic(const torch::Tensor& p) {
  CHECK(torch::allclose(p.sum(1), torch::ones({kT}), 1e-4, 1e-5));
  CHECK(p.triu(1).abs().max().item<float>() == 0.0f);
  CHECK(p.min().item<float>() >= 0.0f);
}

TEST_CASE(
    "the post-softmax mean minimises the squared reconstruction error among the candidates (eq. "
    "14)") {
  Calibrated c = MakeCalibrated();
  SafOptions o;
  o.storage = "dense";
  // The compact fit of a random positional bias need not pass the 0.2-nat check; it is
  // still a candidate pattern here.
  CompactFit fit = FitCompact(PrepareTarget(c.stats.Mean(0, 0)));
  torch::Tensor mean = BuildPattern(o, &c.stats, 0, 0, fit).p;
  const double r_mean = ReconstructionError(c.att, mean);

  std::vector<torch::Tensor> others;
  for (PatternKind k : {PatternKind::kSharpMean, PatternKind::kGaussian, PatternKind::kDirichlet}) {
    o.pattern = k;
    others.push_back(BuildPattern(o, &c.stats, 0, 0, fit).p);
  }
  o.pattern = PatternKind::kStructuredRandom;
  FixedPattern random = BuildPattern(o, &c.stats, 0, 0, fit);
  others.push_back(CompactPattern(random.alpha, random.rho, random.log_z, kT));
  o.pattern = PatternKind::kMean;
  o.storage = "compact";
  FixedPattern compact = BuildPattern(o, &c.stats, 0, 0, fit);
  others.push_back(CompactPattern(compact.alpha, compact.rho, compact.log_z, kT));

  for (const torch::Tensor& p : others) {
    CheckCausalRowStochastic(p);
    double r = ReconstructionError(c.att, p);
    CHECK(r > r_mean);
    // eq. 14 with the empirical mean: R(P) = R(A_hat) + ||P - A_hat||^2 / T^2.
    double gap =
        (p.to(torch::kFloat64) - mean.to(torch::kFloat64)).pow(2).sum().item<double>() / (kT * kT);
    CHECK(r == Approx(r_mean + gap).epsilon(1e-4));
  }
}

TEST_CASE("sampled patterns are drawn once per head: same seed, same draw; other heads differ") {
  Calibrated c = MakeCalibrated();
  auto draw = [&](int64_t head) {
    return GaussianSamplePattern(c.stats, 0, 0,
                                 PatternGenerator(7, 0, head, PatternKind::kGaussian));
  };
  CHECK(torch::equal(draw(0), draw(0)));
  CHECK_FALSE(torch::equal(draw(0), draw(1)));
}

TEST_CASE(
    "the Dirichlet concentration follows eq. 18, scaled and bounded; deterministic rows keep the "
    "mean") {
  torch::Tensor m = torch::zeros({3, 3}, torch::kFloat64),
                u = torch::zeros({3, 3}, torch::kFloat64);
  m[0][0] = 1;  // row 0: one key, deterministic
  m[1][0] = 0.5;
  m[1][1] = 0.5;
  u[1][0] = 0.05;
  u[1][1] = 0.05;  // c = (1 - 0.5) / 0.1 - 1 = 4
  m[2][0] = 0.2;
  m[2][1] = 0.3;
  m[2][2] = 0.5;
  u[2][0] = 1e-9;  // c huge before the bound
  torch::Tensor c = DirichletConcentration(m, u, 16);
  CHECK(c[0].item<double>() == 0.0);
  CHECK(c[1].item<double>() == Approx(64.0));
  CHECK(c[2].item<double>() == Approx(1e6));

  Calibrated cal = MakeCalibrated();
  torch::Tensor p = DirichletSamplePattern(cal.stats, 0, 0, 16,
                                           PatternGenerator(1, 0, 0, PatternKind::kDirichlet));
  CheckCausalRowStochastic(p);
  CHECK(p[0][0].item<float>() == Approx(1.0f));
  // Very large concentration: draws sit close to the mean.
  torch::Tensor tight = DirichletSamplePattern(cal.stats, 0, 0, 1e9,
                                               PatternGenerator(1, 0, 0, PatternKind::kDirichlet));
  CHECK((tight - cal.stats.Mean(0, 0)).abs().max().item<float>() < 0.05f);
}

}  // namespace
}  // namespace headlab::saf
