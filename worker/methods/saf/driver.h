// SafDriver: the whole SAF method behind three training-loop hooks, so that
// worker/exec/train.cc needs no SAF logic of its own. It owns the schedule (one-time,
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
#include "worker/exec/data.h"
#include "worker/methods/saf/intervention.h"
#include "worker/methods/saf/schedule.h"

namespace headlab {
class GptImpl;
}

namespace headlab::saf {

class SafDriver {
 public:
  // `model` must outlive the driver; `split` (train or val tokens, saf.calib_split) too.
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
  SafDriver(const SafOptions& options, GptImpl* model, const TokenSpan& split,
            int64_t total_steps, uint64_t seed, torch::Device device);
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
  std::vector<int64_t> steps_;               // one-time: one step; gradual: one per group
  size_t next_ = 0;
  std::vector<std::vector<HeadId>> groups_;  // gradual
  // Adaptive schedules.
  std::unique_ptr<ValidationBudgetController> budget_;
  std::unique_ptr<TrainLossController> train_loss_;
};

}  // namespace headlab::saf
