// SAF compact fitting (SAF §3.2 eq. 3-4, App. A.2, App. D.1): a fixed causal pattern P is
// approximated by P_hat(i,j) = exp(alpha(j) + rho(i-j)) / Z(i) for j <= i, with O(T)
// storage per head. Included only by LibTorch translation units.
//
// The fit is the maximum-likelihood problem of eq. 4, which only sees P through its two
// length-T marginals (eta_abs, eta_rel). Both the loss and its gradient (eq. 20) are causal
// convolutions/correlations of exp(alpha), exp(rho) and 1/Z, so the FFT fitter runs in
// O(T log T) per step and never forms a T x T matrix; the dense fitter forms the rows
// explicitly and is the reference the FFT path is checked against. All fitting runs in
// float64 on the device its inputs live on (the model's, CUDA included): double precision
// keeps the FFT's absolute error (~1e-16 of the largest term) far below the KL tolerance.
// The FFT fitter takes any number of heads at once (FitCompactBatched): every head's steps
// are the same row-wise operations on an [n, T] batch, so n fits cost one fit's launches.
#pragma once

#include <vector>

#include <torch/torch.h>

namespace headlab::saf {

// How Z(i) and the model marginals are evaluated while fitting.
enum class NormalizerPath { kFft, kDense };

struct CompactFitOptions {
  int64_t steps = 400;  // J, Adam steps without early stopping (App. A.2)
  double lr = 0.05;     // gamma (App. A.2)
  double floor = 1e-9;  // causal entries of the target are floored here (Alg. 1 l.15)
  double max_kl = 0.2;  // epsilon_fit, nats per row (§3.2)
  NormalizerPath path = NormalizerPath::kFft;
};

// The fitted compact pattern of one head. alpha, rho, log_z: float64 [T] on the CPU.
struct CompactFit {
  torch::Tensor alpha, rho, log_z;
  double kl = 0;          // row-averaged KL(P || P_hat) in nats (Alg. 1 l.19)
  bool accepted = false;  // kl <= max_kl
};

// Returns P from an empirical mean pattern [T, T]: causal entries floored at `floor`, each
// row renormalised to sum 1, entries above the diagonal 0; float64 on mean's device
// (Alg. 1 l.15).
torch::Tensor PrepareTarget(const torch::Tensor& mean, double floor = 1e-9);

// The sufficient statistics of eq. 4: eta_abs(j) = sum_{i>=j} P(i,j) and
// eta_rel(d) = sum_{i-j=d} P(i,j); float64 [T] each ([n, T] for n heads: p [n, T, T]).
struct Marginals {
  torch::Tensor eta_abs, eta_rel;
};
Marginals SufficientStatistics(const torch::Tensor& p);

// Returns log Z(i) = log sum_{k<=i} exp(alpha(k) + rho(i-k)) for i < T (eq. 3) by one
// causal FFT convolution of exp(alpha) and exp(rho): O(T log T). float64 [T]. These and
// the functions below work row by row on [n, T] inputs too (n heads), on their device.
torch::Tensor LogNormalizerFft(const torch::Tensor& alpha, const torch::Tensor& rho);
// The same by forming every causal row (O(T^2) memory): the checking path.
torch::Tensor LogNormalizerDense(const torch::Tensor& alpha, const torch::Tensor& rho);

// Returns the dense compact pattern of eq. 3 ([T, T], float64).
torch::Tensor CompactPatternDense(const torch::Tensor& alpha, const torch::Tensor& rho);

// The model's marginals at (alpha, rho): column sums sum_i P_hat(i,j) and diagonal sums
// sum_{i-j=d} P_hat(i,j), plus log Z; by FFT correlations or densely.
struct ModelMarginals {
  torch::Tensor col, diag, log_z;
};
ModelMarginals CompactMarginals(const torch::Tensor& alpha, const torch::Tensor& rho,
                                NormalizerPath path);

// Returns the fit loss of eq. 4 at (alpha, rho) given log Z and the target's marginals.
double FitLoss(const torch::Tensor& log_z, const Marginals& eta, const torch::Tensor& alpha,
               const torch::Tensor& rho);

// Returns the mean over rows of the target's row entropies, (1/T) sum_i H(P[i, 1:i]). With
// it the row-averaged KL is FitLoss - this, from sufficient statistics alone.
double MeanRowEntropy(const torch::Tensor& p);

// Returns (1/T) sum_i KL(P[i, 1:i] || Q[i, 1:i]) for causal row-stochastic P, Q [T, T]
// (entries of P that are 0 contribute 0).
double RowAveragedKl(const torch::Tensor& p, const torch::Tensor& q);

// Fits the compact pattern to a prepared target P (PrepareTarget): initialisation
// alpha = 0, rho(d) = log max(eta_rel(d)/(T-d), 1e-9), then `steps` Adam steps on eq. 4
// (App. A.2). The KL is computed from the sufficient statistics (FFT path) or the dense
// rows (dense path); accepted iff kl <= max_kl.
CompactFit FitCompact(const torch::Tensor& target, const CompactFitOptions& options = {});

// The FFT fit of n heads in one optimisation from their sufficient statistics alone:
// eta [n, T] (SufficientStatistics of each prepared target) and entropy [n] (each target's
// MeanRowEntropy). Runs on eta's device; every head takes exactly the steps FitCompact
// would take for it (the fits agree with FitCompact's to rounding). Returns n fits, CPU.
std::vector<CompactFit> FitCompactBatched(const Marginals& eta, const torch::Tensor& entropy,
                                          const CompactFitOptions& options = {});

}  // namespace headlab::saf
