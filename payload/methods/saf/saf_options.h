// SAF method options: the fixed-pattern kinds (§3.2), schedules (§3.3, App. A.3) and the
// typed `saf.*` run-config section (payload/methods/saf/README.md lists every key). Torch-free.
#pragma once

#include <cstdint>
#include <string>

#include "common/json.h"
#include "common/status.h"
#include "payload/methods/saf/scores.h"

namespace headlab::saf {

// The candidate fixed patterns of §3.2.
enum class PatternKind {
  kMean,              // post-softmax mean A_hat (dense or compact)
  kSharpMean,         // softmax of the mean logits (dense)
  kGaussian,          // softmax of logits sampled per entry from N(mean, var) (dense)
  kDirichlet,         // rows sampled from Dirichlet(c_i m_i), eq. 18 (dense)
  kStructuredRandom,  // eq. 3 with alpha, rho iid N(0, 1) (compact)
};
// Returns "mean", "sharp_mean", "gaussian", "dirichlet", "structured_random".
const char* PatternKindName(PatternKind k);
StatusOr<PatternKind> ParsePatternKind(const std::string& name);

// The replacement schedules of §3.3 / App. A.3.
enum class ScheduleKind { kOneTime, kGradual, kValidationBudget, kTrainLoss };
// Returns "one_time", "gradual", "validation_budget", "train_loss".
const char* ScheduleKindName(ScheduleKind k);
StatusOr<ScheduleKind> ParseScheduleKind(const std::string& name);

// The typed `saf` section of a run config. Keys, ranges and defaults are defined once, in
// saf_schema.cc (the paper's SAF recipe, §5.2: variance selection, compact mean patterns,
// one-time midpoint replacement, rate 25%, frozen patterns); the initialisers below repeat
// the defaults for code that builds options directly, and saf_options_test checks that
// they agree.
struct SafOptions {
  std::string method = "none";  // saf.method: none | replace (SAF) | prune (same heads, pruned)
  double rate = 0.25;           // saf.rate, r in [0, 1]: k = round(r L H)
  ScoreKind score = ScoreKind::kVariance;          // saf.score
  PatternKind pattern = PatternKind::kMean;        // saf.pattern
  std::string storage = "compact";                 // saf.storage: compact | dense (mean only)
  ScheduleKind schedule = ScheduleKind::kOneTime;  // saf.schedule
  double tau = 0.5;              // saf.tau: replacement fraction of the run (one-time)
  double tau_start = 0.3;        // saf.tau_start: first gradual group / controller start
  double tau_end = 0.7;          // saf.tau_end: last gradual group / controller end
  int64_t groups = 5;            // saf.groups: gradual groups (App. A.3: five)
  int64_t calib_sequences = 32;  // saf.calib_sequences, N (App. C.1: 32 at 4K)
  int64_t calib_batch = 2;       // saf.calib_batch: sequences per calibration forward
  // saf.calib_split: train | calib (the held-out calibration split, data.calib_fraction > 0:
  // disjoint from training and reporting data, SAF App. A.1, C.3.1) | val (the reporting
  // split); drawn by a generator of its own either way.
  std::string calib_split = "train";
  // saf.calib_memory_gb: GiB of calibration statistics ([H, T, T] moments per layer, plus
  // the cached residual streams) held at once; layers are calibrated in chunks that fit.
  double calib_memory_gb = 8;
  int64_t output_sequences = 16;  // saf.output_sequences, N_f for the output-aware scores
  int64_t output_queries = 64;    // saf.output_queries: |I| per sequence
  int64_t fit_steps = 400;        // saf.fit_steps, J
  double fit_lr = 0.05;           // saf.fit_lr, gamma
  double fit_max_kl = 0.2;        // saf.fit_max_kl, epsilon_fit (nats per row)
  std::string fit_path = "fft";   // saf.fit_path: fft | dense
  std::string heads = "";         // saf.heads: prescribed "L.H,L.H,..." (no substitution)
  double dirichlet_scale = 16;    // saf.dirichlet_scale (App. C.1: 16)
  bool trainable = false;         // saf.trainable: alpha/rho trained after install (App. C.3.2)
  double budget = 0.01;           // saf.budget: validation-budget relative PPL cost
  int64_t group_heads = 0;        // saf.group_heads: controller increment (0 = round(0.05 L H))
  int64_t check_every = 0;        // saf.check_every: controller cadence in updates (0 = steps/20)
  double z = 2.0;                 // saf.z: train-loss controller SD multiplier
  int64_t window = 0;             // saf.window: train-loss controller window (0 = steps/20)
  int64_t pattern_seed = 0;       // saf.pattern_seed: sampled patterns (same draw at every rate)
  int64_t selection_seed = -1;    // saf.selection_seed: random-head draws; -1 = per run (DrawSeed)
};

// Returns true iff `options` asks for an intervention (method replace or prune).
inline bool Active(const SafOptions& o) { return o.method != "none"; }

// Returns true iff `options`' fixed patterns are compact (alpha, rho), as trainable
// patterns (App. C.3.2) need.
inline bool TrainablePatternOk(const SafOptions& o) {
  return o.method != "prune" && ((o.pattern == PatternKind::kMean && o.storage == "compact") ||
                                 o.pattern == PatternKind::kStructuredRandom);
}

// Returns the seed of a run's own SAF draws (calibration windows, and random heads unless
// saf.selection_seed fixes them): the run seed, mixed with parent.run in a shared-parent
// continuation, so every parent of a `--set parent.run=a,b,c` list gets its own draws while
// all arms of one parent share them (as AoH's random control mixes it, aoh_options.h).
uint64_t DrawSeed(const Json& config, int64_t seed);

// Reads the `saf` section of a normalised run config (NormalizeRunConfig has checked every
// key against saf_schema.cc); a config that is not normalised is InvalidArgument.
StatusOr<SafOptions> SafOptionsFromJson(const Json& config, const std::string& file);

}  // namespace headlab::saf
