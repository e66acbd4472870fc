// TrainHooks: what a method (SAF, AoH, AAH, pruning controls) adds to the training loop of
// run kind "train", so that train.cc holds no method logic. Each method implements the
// hooks it needs in payload/methods/<method>/train_hooks.cc; method_hooks.h builds the list.
// LibTorch translation units only.
//
// The loop (train.cc) calls, for every hook in list order:
//   OnStart                     once, after the model and optimiser are built and restored
//   per update (step = updates completed before it):
//     BeforeUpdate(x)           after the first micro-batch is drawn, before the update
//                               clears the gradients and before any forward
//     ... forward/backward of every micro-batch ...
//     AfterBackward             before clipping and the optimiser step (data parallel:
//                               the gradients are already averaged across ranks)
//     ... clip, optimiser step, ++step ...
//     AfterUpdate(loss)
//     LogRow                    when the step's training row is logged
//     AfterEvaluate             after each held-out evaluation
//   AfterTraining               after the last update, before the final evaluation and
//                               checkpoint (a change made here is evaluated and saved)
//   Summarize                   after the final evaluation: adds to the summary values
// SaveState is called at every checkpoint; its bytes come back to OnStart on a resume of
// the same run (never from a parent checkpoint: a continuation starts its method afresh).
// A non-OK Status from any hook fails the run with that message.
//
// Data-parallel runs (train.ranks > 1, dist.h): every rank runs the hooks, and they see the
// run as one process with the global batch would: config.train.batch_size is ranks x
// batch_size, BeforeUpdate's x holds the whole global micro-batch, AfterBackward reads the
// averaged gradients, AfterUpdate gets the mean loss over ranks, eval_loss uses the global
// batch's rows. A method must choose from these and from its own generators only (never
// from a rank's slice or a clock), so that every rank chooses alike; the loop checks it
// after OnStart, BeforeUpdate and AfterUpdate and copies rank 0's fixed patterns to the
// other ranks (replica_sync.h). Rank 0 alone evaluates, logs and checkpoints: AfterEvaluate,
// LogRow, Summarize and SaveState run there only (they must not change the model), and
// the other ranks' out_dir is a folder of their own (rank-R) whose artifacts nobody reports.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "common/json.h"
#include "common/status.h"
#include "payload/exec/data.h"
#include "payload/exec/events.h"
#include "payload/exec/exec_config.h"
#include "payload/exec/model.h"

namespace headlab {

// What the loop shares with its hooks. References stay valid for the whole run.
struct TrainContext {
  const ExecConfig& config;
  const Json& config_json;  // the normalized run config (sections saf, aoh, aah, prune, ...)
  const std::string& out_dir;
  Gpt& model;
  // A hook that changes parameter shapes (physical pruning) rebuilds the optimiser here.
  std::unique_ptr<torch::optim::AdamW>& optimizer;
  const Dataset& data;
  torch::Device device;
  EventSink* events;
  int64_t step = 0;  // updates completed
  // Held-out loss (nats/token) of the model as it is now on the first `batches` fixed
  // evaluation batches of the reporting split; eval mode, no gradients, training mode
  // restored afterwards.
  std::function<double(int64_t batches)> eval_loss;
  // The same on `batches` fixed batches of the calibration split (data.calib_fraction > 0:
  // tokens neither the sampler nor the reporting evaluation reads), for controllers that must
  // select on a split of their own (SAF's validation budget, App. A.3); empty or NaN when the
  // run holds no calibration split.
  std::function<double(int64_t batches)> controller_loss;
  // One-off interventions that changed the model (a SAF event, an AoH conversion, a
  // pruning): a hook adds one for each it makes. The loop leaves the update that carried it
  // (and, for one made in AfterUpdate, the next update, whose forward re-plans the changed
  // layers) out of train.tokens_per_s, restarts train.tokens_per_s_after_event after it,
  // and records the layers' attention plans after it in provenance (attention_plans).
  // Work a method does at every update (AAH's controller) is no intervention: it counts.
  int64_t interventions = 0;
};

using MetricRow = std::vector<std::pair<std::string, double>>;

class TrainHooks {
 public:
  virtual ~TrainHooks() = default;
  // Names this method's checkpoint entry ("saf", "aoh", ...): unique among the hooks.
  virtual const char* name() const = 0;

  // `saved`: the state SaveState wrote into the checkpoint this attempt resumes from, if
  // any. `provenance`: fields to add to the run's provenance record.
  // The defaults do nothing: a method overrides the steps it takes part in (the names of
  // the unused parameters are left in comments).
  virtual Status OnStart(TrainContext& /*ctx*/, const std::optional<std::string>& /*saved*/,
                         Json* /*provenance*/) {
    return Status::Ok();
  }
  // `x`: the first micro-batch's inputs [batch, context] of this update, on ctx.device.
  virtual Status BeforeUpdate(TrainContext& /*ctx*/, const torch::Tensor& /*x*/) {
    return Status::Ok();
  }
  virtual Status AfterBackward(TrainContext& /*ctx*/) { return Status::Ok(); }
  // `loss`: the update's training loss (mean over micro-batches).
  virtual Status AfterUpdate(TrainContext& /*ctx*/, double /*loss*/) { return Status::Ok(); }
  virtual void LogRow(TrainContext& /*ctx*/, MetricRow* /*metrics*/) {}
  virtual Status AfterEvaluate(TrainContext& /*ctx*/) { return Status::Ok(); }
  virtual Status AfterTraining(TrainContext& /*ctx*/) { return Status::Ok(); }
  virtual Status Summarize(TrainContext& /*ctx*/, Json* /*values*/) { return Status::Ok(); }
  virtual std::string SaveState(TrainContext& /*ctx*/) { return ""; }
  // Steps between a controller's actions (AAH's aah.control_every), so that the flops run
  // kind averages the method's cost over control and non-control steps; 1 = every step.
  virtual int64_t ControlPeriod() const { return 1; }
};

}  // namespace headlab
