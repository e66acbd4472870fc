// SafHooks: the SAF method in the training loop (payload/exec/train_hooks.h). It owns a
// SafDriver (schedules, calibration draws, gradient EMA, controllers) and turns each
// intervention into a saf_event_<n>.json artifact (kind saf_head_map: head map rows, fit
// KLs, ranks, Table 13 cost split), per-event metrics and summary values (saf.* names in
// saf_metrics.h). With saf.trainable = 1 it adds fixed heads' alpha/rho to the
// optimiser (App. C.3.2). LibTorch translation units only.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "payload/exec/train_hooks.h"
#include "payload/methods/saf/driver.h"
#include "payload/methods/saf/saf_options.h"

namespace headlab::saf {

class SafHooks : public TrainHooks {
 public:
  // `options` must be Active; `file` names the config in error messages.
  SafHooks(const SafOptions& options, std::string file);

  const char* name() const override { return "saf"; }
  Status OnStart(TrainContext& ctx, const std::optional<std::string>& saved,
                 Json* provenance) override;
  Status BeforeUpdate(TrainContext& ctx, const torch::Tensor& x) override;
  Status AfterBackward(TrainContext& ctx) override;
  Status AfterUpdate(TrainContext& ctx, double loss) override;
  // The last event (tau = 1: replacement after training, Alg. 1).
  Status AfterTraining(TrainContext& ctx) override;
  Status Summarize(TrainContext& ctx, Json* values) override;
  std::string SaveState(TrainContext& ctx) override;

  const SafDriver* driver() const { return driver_.get(); }

 private:
  // Runs driver->BeforeUpdate(step) and publishes what it did.
  Status RunDue(TrainContext& ctx);
  // Writes, emits and accounts each new report; also publishes an undo (installed heads
  // dropped without a report) as an event of its own.
  Status Publish(TrainContext& ctx, std::vector<InterventionReport> reports);
  // Makes newly fixed compact heads' alpha/rho trainable and adds them to the optimiser.
  Status AddTrainable(TrainContext& ctx);

  SafOptions options_;
  std::string file_;
  std::unique_ptr<SafDriver> driver_;
  int64_t published_ = 0;       // saf_event_<n>.json files written
  int64_t last_installed_ = 0;  // driver->heads_installed() when last published
  InterventionCost cost_;       // summed over events
  int64_t fits_run_ = 0, fits_rejected_ = 0;
  std::map<std::pair<int64_t, int64_t>, double> fit_kl_;  // latest fit per (layer, head)
  std::vector<std::pair<int64_t, int64_t>> trainable_;    // heads with trainable alpha/rho
  Json last_event_;  // the last published event file (null before one)
  int64_t last_event_step_ = -1;
  int64_t last_metric_step_ = -1;  // the step of the last saf.* metrics emitted
};

}  // namespace headlab::saf
