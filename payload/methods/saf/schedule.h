// SAF replacement schedules (§3.3, App. A.2-A.3) as pure decision logic: when to intervene
// and whether to keep an increment. The training loop owns the model and the losses; it
// asks these objects before each update. Steps count completed optimiser updates: an event
// "at step t" runs after t updates and before update t+1 (Alg. 1 l.5-8). Torch-free.
//
// App. A.3 sketches the two adaptive controllers without their constants; the concrete
// tests used here are:
//   validation budget  propose `group` more heads every `check_every` updates inside
//                      [first, last]; keep the group iff the cumulative paired relative PPL
//                      cost sum_k (exp(L_after,k - L_before,k) - 1) stays <= budget; the
//                      first group over budget is undone and the controller stops.
//   train-loss         with W = window, over the losses since the last event:
//                      power    at least 2W losses observed (the test has its full window);
//                      plateau  mean(previous W) - mean(last W) < z * SE (no significant
//                               improvement; SE of the difference of the two means);
//                      recovery W losses after the event with mean <= pre-event mean + z * SE;
//                      undo     no recovery within `max_wait` updates: the increment is
//                               undone and the controller stops.
//                      A larger z triggers earlier and accepts recovery sooner (App. A.3).
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "payload/methods/saf/selection.h"

namespace headlab::saf {

// Returns the one-time replacement step round(tau M), clamped to [0, M].
int64_t OneTimeStep(double tau, int64_t total_steps);

// Returns `groups` replacement steps evenly spaced from round(tau_start M) to
// round(tau_end M) (one group: tau_start).
std::vector<int64_t> GradualSteps(double tau_start, double tau_end, int64_t groups,
                                  int64_t total_steps);

// Splits an ordered head list into `groups` nearly equal consecutive groups, the first
// ones larger by one (App. A.3: five nearly equal groups); empty groups are dropped.
std::vector<std::vector<HeadId>> SplitIntoGroups(const std::vector<HeadId>& heads, int64_t groups);

struct ControllerOptions {
  int64_t first_step = 0;   // no proposal before this step
  int64_t last_step = 0;    // nor after this one
  int64_t group_heads = 1;  // heads per increment
  int64_t max_heads = 0;    // cap on heads installed (the configured rate's k)
};

// The validation-budget controller (App. A.3).
class ValidationBudgetController {
 public:
  ValidationBudgetController(const ControllerOptions& options, double budget, int64_t check_every);

  // Returns true iff an increment should be proposed at `step`.
  bool ShouldPropose(int64_t step) const;
  // Returns the size of the next increment (<= group_heads, within max_heads).
  int64_t NextGroupSize() const;
  // Reports the paired held-out losses before and after installing the proposed group of
  // `size` heads (same batches). Returns true to keep it, false to undo it (then stops).
  bool Report(double loss_before, double loss_after, int64_t size);
  // Stops proposing (e.g. no further head has an acceptable fit).
  void Stop() { stopped_ = true; }

  double spent() const { return spent_; }
  int64_t installed() const { return installed_; }
  bool stopped() const { return stopped_; }

  // The progress a resumed run needs (spent, installed, stopped); options come from config.
  Json SaveState() const;
  Status LoadState(const Json& state);

 private:
  ControllerOptions options_;
  double budget_;
  int64_t check_every_;
  double spent_ = 0;
  int64_t installed_ = 0;
  bool stopped_ = false;
};

// The train-loss-triggered controller (App. A.3).
class TrainLossController {
 public:
  enum class Action { kNone, kPropose, kUndo };

  TrainLossController(const ControllerOptions& options, double z, int64_t window, int64_t max_wait);

  // Feeds the training loss of update `step` (steps increase by one); returns what to do
  // before the next update. After kPropose the caller installs NextGroupSize() heads and
  // calls Installed(); after kUndo it reverts the last group.
  Action Observe(int64_t step, double loss);
  int64_t NextGroupSize() const;
  void Installed(int64_t size);
  // Stops proposing (e.g. no further head has an acceptable fit).
  void Stop() { stopped_ = true; }

  int64_t installed() const { return installed_; }
  bool stopped() const { return stopped_; }
  bool waiting_for_recovery() const { return waiting_; }

  // The progress a resumed run needs (losses, waiting, baseline, counts); options come
  // from config.
  Json SaveState() const;
  Status LoadState(const Json& state);

 private:
  ControllerOptions options_;
  double z_;
  int64_t window_, max_wait_;
  std::deque<double> losses_;  // since the last event (at most 2 * window kept)
  bool waiting_ = false;       // an increment is installed and not yet recovered
  int64_t event_step_ = 0;
  double baseline_mean_ = 0, baseline_var_ = 0;  // the last W losses before the event
  int64_t installed_ = 0, last_size_ = 0;
  bool stopped_ = false;
};

}  // namespace headlab::saf
