// SAF fixed patterns: mean, sharp mean, Gaussian and Dirichlet samples, structured random.
#include "payload/methods/saf/patterns.h"

#include <ATen/CPUGeneratorImpl.h>

namespace headlab::saf {
namespace {

constexpr double kMinConcentration = 1e-2, kMaxConcentration = 1e6;  // App. C.2 bounds
constexpr double kMinDirichletParam = 1e-6;                          // App. C.2 floor
constexpr double kDeterministic = 1e-12;

torch::Tensor Future(int64_t T) { return torch::ones({T, T}, torch::kBool).triu(1); }

torch::Tensor Cpu64(const torch::Tensor& t) { return t.detach().to(torch::kCPU, torch::kFloat64); }

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

at::Generator PatternGenerator(uint64_t seed, int64_t layer, int64_t head, PatternKind kind) {
  uint64_t s = SplitMix(SplitMix(SplitMix(SplitMix(seed) ^ uint64_t(layer)) ^ uint64_t(head)) ^
                        uint64_t(kind));
  return at::make_generator<at::CPUGeneratorImpl>(s);
}

torch::Tensor CausalSoftmax(const torch::Tensor& logits) {
  return torch::softmax(logits.masked_fill(Future(logits.size(0)).to(logits.device()), -INFINITY),
                        -1);
}

torch::Tensor SharpMeanPattern(const CalibrationStats& stats, int64_t l, int64_t h) {
  return CausalSoftmax(Cpu64(stats.layer(l).logits.Mean()[h])).to(torch::kFloat32);
}

torch::Tensor GaussianSamplePattern(const CalibrationStats& stats, int64_t l, int64_t h,
                                    at::Generator gen) {
  const RunningMoments& m = stats.layer(l).logits;
  torch::Tensor mean = Cpu64(m.Mean()[h]), sd = Cpu64(m.EntryVariance()[h]).clamp_min(0).sqrt();
  torch::Tensor eps = torch::randn(mean.sizes(), gen, torch::kFloat64);
  return CausalSoftmax(mean + sd * eps).to(torch::kFloat32);
}

torch::Tensor DirichletConcentration(const torch::Tensor& mean, const torch::Tensor& var,
                                     double scale) {
  torch::Tensor m = Cpu64(mean).tril(), u = Cpu64(var).tril();
  torch::Tensor spread = 1 - m.pow(2).sum(1), total = u.sum(1);
  torch::Tensor c = (spread / total.clamp_min(kDeterministic) - 1) * scale;  // SAF eq. 18
  c = c.clamp(kMinConcentration, kMaxConcentration);
  torch::Tensor deterministic = (total < kDeterministic) | (spread < kDeterministic);
  return c.masked_fill(deterministic, 0.0);
}

torch::Tensor DirichletSamplePattern(const CalibrationStats& stats, int64_t l, int64_t h,
                                     double scale, at::Generator gen) {
  const RunningMoments& a = stats.layer(l).att;
  torch::Tensor mean = Cpu64(a.Mean()[h]);
  const int64_t T = mean.size(0);
  torch::Tensor c = DirichletConcentration(mean, a.EntryVariance()[h], scale);
  torch::Tensor params = (c.unsqueeze(1) * mean).clamp_min(kMinDirichletParam);
  // Gamma(x) = Gamma(x + 1) * U^(1/x): drawn in log space, a tiny parameter gives a very
  // negative log rather than an underflowed 0, and the row normalises by a softmax of logs
  // (the same as dividing the gamma draws by their sum).
  torch::Tensor log_g =
      torch::log(at::_standard_gamma(params + 1, gen)) +
      torch::log(torch::rand({T, T}, gen, torch::kFloat64).clamp_min(1e-300)) / params;
  torch::Tensor rows = CausalSoftmax(log_g);
  torch::Tensor deterministic = (c == 0).unsqueeze(1);  // nearly deterministic: the mean
  return torch::where(deterministic, mean, rows).to(torch::kFloat32);
}

FixedPattern StructuredRandomPattern(int64_t T, at::Generator gen) {
  FixedPattern p;
  p.kind = PatternKind::kStructuredRandom;
  torch::Tensor alpha = torch::randn({T}, gen, torch::kFloat64);
  torch::Tensor rho = torch::randn({T}, gen, torch::kFloat64);
  p.alpha = alpha.to(torch::kFloat32);
  p.rho = rho.to(torch::kFloat32);
  p.log_z = LogNormalizerFft(alpha, rho).to(torch::kFloat32);
  return p;
}

FixedPattern BuildPattern(const SafOptions& options, const CalibrationStats* stats, int64_t l,
                          int64_t h, const CompactFit& mean_fit) {
  const uint64_t seed = uint64_t(options.pattern_seed);
  FixedPattern p;
  p.kind = options.pattern;
  p.dense = true;
  const bool compact = options.pattern == PatternKind::kStructuredRandom ||
                       (options.pattern == PatternKind::kMean && options.storage == "compact");
  TORCH_CHECK(compact || stats != nullptr, "a dense SAF pattern needs the full statistics");
  switch (options.pattern) {
    case PatternKind::kMean:
      if (compact) {
        p.dense = false;
        p.alpha = mean_fit.alpha.to(torch::kFloat32);
        p.rho = mean_fit.rho.to(torch::kFloat32);
        p.log_z = mean_fit.log_z.to(torch::kFloat32);
      } else {
        p.p = stats->Mean(l, h).to(torch::kCPU, torch::kFloat32);
      }
      return p;
    case PatternKind::kSharpMean:
      p.p = SharpMeanPattern(*stats, l, h);
      return p;
    case PatternKind::kGaussian:
      p.p = GaussianSamplePattern(*stats, l, h, PatternGenerator(seed, l, h, p.kind));
      return p;
    case PatternKind::kDirichlet:
      p.p = DirichletSamplePattern(*stats, l, h, options.dirichlet_scale,
                                   PatternGenerator(seed, l, h, p.kind));
      return p;
    case PatternKind::kStructuredRandom:
      return StructuredRandomPattern(mean_fit.alpha.size(0), PatternGenerator(seed, l, h, p.kind));
  }
  return p;
}

CalibrationNeeds PatternNeeds(PatternKind kind) {
  CalibrationNeeds n;
  n.logits = kind == PatternKind::kSharpMean || kind == PatternKind::kGaussian;
  n.entry_variance = kind == PatternKind::kDirichlet;
  return n;
}

bool NeedsFullStatistics(const SafOptions& options) {
  if (options.fit_path == "dense") return true;
  if (options.method == "prune") return false;  // no pattern is built
  return options.pattern == PatternKind::kSharpMean || options.pattern == PatternKind::kGaussian ||
         options.pattern == PatternKind::kDirichlet ||
         (options.pattern == PatternKind::kMean && options.storage == "dense");
}

}  // namespace headlab::saf
