// SafDriver: the whole SAF method behind three training-loop hooks, so that
// payload/exec/train.cc needs no SAF logic of its own. It owns the schedule (one-time,
// gradual, validation-budget, train-loss), the Q/K gradient EMA, and the calibration draws
// (a generator of its own: the training sampler is never advanced). Included only by
// LibTorch translation units. Not thread-safe; call from the training thread.
//
// Per update t = 1..M the loop calls, in order:
//   BeforeUpdate(t - 1, eval_loss, &reports)  // events "at step t-1" (Alg. 1 l.8-25)
//   ... forward, backward ...
//   AfterBackward()                           // gradient scores only (eq. 8-9)
//   ... clip, optimiser step ...
//   AfterUpdate(t, loss, &reports)            // train-loss controller only
// and after the last update BeforeUpdate(M, ...) once more (tau = 1: replacement after
// training). Each event appends its InterventionReport (head map, cost split).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "common/json.h"
#include "common/status.h"
#include "payload/exec/data.h"
#include "payload/methods/saf/intervention.h"
#include "payload/methods/saf/schedule.h"

namespace headlab {
class GptImpl;
}

namespace headlab::saf {

// The calibration split saf.calib_split names in `data`: its training tokens, the held-out
// calibration split (data.calib_fraction > 0) or the reporting split. InvalidArgument
// naming `file` and the field when "calib" is asked of data without a calibration split.
StatusOr<TokenSpan> CalibrationSplit(const SafOptions& options, const Dataset& data,
                                     const std::string& file);

// Returns the seed of event `event`'s calibration draws in a run whose draws are seeded by
// `seed`: each event draws its own sequences (DrawCalibrationBatches).
uint64_t EventSeed(uint64_t seed, int64_t event);

// The inputs of event `event` of a run whose draws are seeded by `seed` (DrawSeed): the
// model's layers and view, calibration batches from `split` drawn by a generator seeded
// from (seed, event), the output-aware batches when the score needs them, and the random
// control's shuffle seed (saf.selection_seed, else `seed`). k, step and the rest are the
// caller's.
InterventionInputs EventInputs(const SafOptions& options, GptImpl* model, const TokenSpan& split,
                               uint64_t seed, int64_t event, torch::Device device);

// Returns the heads SAF's first event would select on `model` as it is now (k =
// round(r L H) in score order under the compact-fit rule, or saf.heads) with a driver of
// `seed` and `split`, without installing anything: the set a pruning control removes
// (prune.method saf) so it removes exactly what an saf.method replace arm of the same seed
// fixes from the same parent. InvalidArgument as RunIntervention, and for scores that need
// the training loop's gradient EMA.
StatusOr<std::vector<HeadId>> SelectFirstEventHeads(const SafOptions& options, GptImpl* model,
                                                    const TokenSpan& split, uint64_t seed,
                                                    torch::Device device);

class SafDriver {
 public:
  // `model` must outlive the driver; `split` (CalibrationSplit) too. `seed` seeds the
  // driver's own draws (DrawSeed of the run).
  // InvalidArgument for options the model cannot meet (bad saf.heads, ...).
  static StatusOr<std::unique_ptr<SafDriver>> Create(const SafOptions& options, GptImpl* model,
                                                     const TokenSpan& split, int64_t total_steps,
                                                     uint64_t seed, torch::Device device);

  // Runs the events due after `step` completed updates. `eval_loss` returns the held-out
  // (controller partition) loss of the model as it is now; only the validation-budget
  // schedule calls it. A failed one-time or gradual event fails the run (its Status); an
  // adaptive controller that cannot find another head simply stops.
  Status BeforeUpdate(int64_t step, const std::function<double()>& eval_loss,
                      std::vector<InterventionReport>* reports);
  // Folds this update's Q/K gradient norms into the EMA (no-op unless the score needs it).
  void AfterBackward();
  // Feeds update `step`'s training loss to the train-loss controller (no-op otherwise).
  Status AfterUpdate(int64_t step, double loss, std::vector<InterventionReport>* reports);

  bool needs_gradients() const { return NeedsGradientEma(options_.score); }
  // Heads currently fixed (or pruned) by SAF, in installation order.
  int64_t heads_installed() const { return int64_t(installed_.size()); }
  const std::vector<HeadId>& installed() const { return installed_; }

  // The schedule state a resumed run needs so that it neither repeats nor loses an event:
  // events done, installed heads, the next scheduled event, gradual groups, the gradient
  // EMA and the controllers' progress. The heads' states themselves travel in the model
  // checkpoint. LoadState restores it into a driver Created from the same options.
  Json SaveState() const;
  Status LoadState(const Json& state);

 private:
  SafDriver(const SafOptions& options, GptImpl* model, const TokenSpan& split, int64_t total_steps,
            uint64_t seed, torch::Device device);
  StatusOr<InterventionResult> Run(int64_t step, int64_t k, const std::vector<HeadId>& prescribed,
                                   bool install);
  void Revert(const std::vector<HeadId>& heads);

  SafOptions options_;
  GptImpl* model_;
  TokenSpan split_;
  int64_t total_steps_, k_;
  uint64_t seed_;
  torch::Device device_;
  std::vector<HeadId> prescribed_;
  GradientEma ema_;
  int64_t events_ = 0;
  std::vector<HeadId> installed_;
  std::vector<HeadId> last_group_;
  // Fixed schedules.
  std::vector<int64_t> steps_;  // one-time: one step; gradual: one per group
  size_t next_ = 0;
  std::vector<std::vector<HeadId>> groups_;  // gradual
  // Adaptive schedules.
  std::unique_ptr<ValidationBudgetController> budget_;
  std::unique_ptr<TrainLossController> train_loss_;
};

}  // namespace headlab::saf
