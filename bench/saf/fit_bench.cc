// Times SAF's batched compact fit (FitCompactBatched: eq. 4 by App. A.2's Adam, FFT path)
// for n heads at context T, on the CPU or a CUDA device, and optionally the per-head fit
// (FitCompact) on a few of the same heads for comparison. The targets' marginals are
// those of mixtures of two random compact patterns (a causal row-stochastic target that
// the compact form does not reproduce exactly), built in O(T log T) per head, so no
// [T, T] matrix is formed at any T. Prints one JSON object.
//
//   saf_fit_bench [--heads N] [--context T] [--steps J] [--device cpu|cuda] [--per-head M]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

#include <torch/torch.h>

#include "payload/exec/bench_clock.h"
#include "payload/methods/saf/compact_fit.h"

namespace {

using Clock = std::chrono::steady_clock;
using headlab::saf::CompactFitOptions;
using headlab::saf::Marginals;

const char kUsage[] =
    "usage: saf_fit_bench [--heads N] [--context T] [--steps J] [--device cpu|cuda] [--per-head "
    "M]\n"
    "  Times SAF's batched compact fit of N heads (default 144) at context T (4096) with J Adam\n"
    "  steps (400) on the device (cuda when available), and the per-head fit of M of them\n"
    "  (default 0). Prints JSON: wall and process-CPU seconds for the batch (after one\n"
    "  warm-up), mean wall seconds per single-head fit.\n";

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Marginals of 0.5 (P1 + P2) for random compact patterns P1, P2 of n heads (linear in P).
Marginals MixtureMarginals(int64_t n, int64_t T, torch::Device device) {
  torch::manual_seed(1);
  auto f64 = torch::dtype(torch::kFloat64).device(device);
  Marginals eta;
  for (int k = 0; k < 2; ++k) {
    torch::Tensor alpha = torch::randn({n, T}, f64) * 2;
    torch::Tensor rho = torch::randn({n, T}, f64) * 2 - torch::arange(T, f64).div(double(T) / 8);
    headlab::saf::ModelMarginals m =
        headlab::saf::CompactMarginals(alpha, rho, headlab::saf::NormalizerPath::kFft);
    eta.eta_abs = k == 0 ? m.col * 0.5 : eta.eta_abs + m.col * 0.5;
    eta.eta_rel = k == 0 ? m.diag * 0.5 : eta.eta_rel + m.diag * 0.5;
  }
  return eta;
}

bool ParseInt(const char* s, int64_t* out) {
  char* end = nullptr;
  long long v = std::strtoll(s, &end, 10);
  if (end == s || *end != '\0' || v < 0) return false;
  *out = v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t heads = 144, T = 4096, steps = 400, per_head = 0;
  std::string device_name = torch::cuda::is_available() ? "cuda" : "cpu";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "saf_fit_bench: %s needs a value\n%s", a.c_str(), kUsage);
      return 2;
    }
    const char* v = argv[++i];
    bool ok = true;
    if (a == "--heads")
      ok = ParseInt(v, &heads) && heads > 0;
    else if (a == "--context")
      ok = ParseInt(v, &T) && T > 1;
    else if (a == "--steps")
      ok = ParseInt(v, &steps);
    else if (a == "--per-head")
      ok = ParseInt(v, &per_head);
    else if (a == "--device")
      ok = (device_name = v) == "cpu" || device_name == "cuda";
    else
      ok = false;
    if (!ok) {
      std::fprintf(stderr, "saf_fit_bench: bad argument %s %s\n%s", a.c_str(), v, kUsage);
      return 2;
    }
  }
  if (device_name == "cuda" && !torch::cuda::is_available()) {
    std::fprintf(stderr, "saf_fit_bench: --device cuda, but LibTorch sees no CUDA device\n");
    return 2;
  }
  const torch::Device device(device_name == "cuda" ? torch::kCUDA : torch::kCPU);
  torch::NoGradGuard no_grad;
  const Marginals eta = MixtureMarginals(heads, T, device);
  // The targets' entropies only shift each KL by a constant; 0 keeps the bench O(T log T).
  const torch::Tensor entropy = torch::zeros({heads}, torch::dtype(torch::kFloat64).device(device));
  CompactFitOptions options;
  options.steps = steps;

  CompactFitOptions warm = options;
  warm.steps = 2;  // FFT plans and allocator pools
  headlab::saf::FitCompactBatched(eta, entropy, warm);
  headlab::SynchronizeDevice(device);
  Clock::time_point t0 = Clock::now();
  const std::clock_t c0 = std::clock();
  std::vector<headlab::saf::CompactFit> fits =
      headlab::saf::FitCompactBatched(eta, entropy, options);
  headlab::SynchronizeDevice(device);  // the fits come back on the CPU: already waited for
  const double batched_s = SecondsSince(t0);
  // Process CPU seconds: on a shared machine the wall time also counts other processes'.
  const double batched_cpu_s = double(std::clock() - c0) / CLOCKS_PER_SEC;

  double per_head_s = 0;
  for (int64_t i = 0; i < per_head; ++i) {
    Marginals one = {eta.eta_abs.narrow(0, i % heads, 1), eta.eta_rel.narrow(0, i % heads, 1)};
    t0 = Clock::now();
    headlab::saf::FitCompactBatched(one, entropy.narrow(0, 0, 1), options);
    per_head_s += SecondsSince(t0);
  }
  std::printf(
      "{\"heads\": %lld, \"context\": %lld, \"steps\": %lld, \"device\": \"%s\", "
      "\"batched_s\": %.4f, \"batched_cpu_s\": %.4f, \"per_head_fits\": %lld, \"per_head_mean_s\": "
      "%.4f, "
      "\"first_alpha0\": %.6g}\n",
      (long long)heads, (long long)T, (long long)steps, headlab::DeviceLabel(device).c_str(),
      batched_s, batched_cpu_s, (long long)per_head,
      per_head > 0 ? per_head_s / double(per_head) : 0.0,
      fits.empty() ? 0.0 : fits[0].alpha[0].item<double>());
  return 0;
}
