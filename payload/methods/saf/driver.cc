// SafDriver: SAF schedules and events behind the training loop's hooks.
#include "payload/methods/saf/driver.h"

#include <algorithm>
#include <cmath>

#include "payload/exec/model.h"

namespace headlab::saf {
namespace {

// The controllers' defaults when their keys are 0: 5% of the heads per increment, and a
// check / window of 5% of the run (App. A.3 gives no constants).
constexpr double kDefaultGroupFraction = 0.05;
constexpr int64_t kDefaultCadenceDivisor = 20;
constexpr int64_t kRecoveryWindows = 4;  // train-loss undo after 4 W updates without recovery

}  // namespace

SafDriver::SafDriver(const SafOptions& options, GptImpl* model, const TokenSpan& split,
                     int64_t total_steps, uint64_t seed, torch::Device device)
    : options_(options),
      model_(model),
      split_(split),
      total_steps_(total_steps),
      k_(TargetHeadCount(options.rate, model->config().layers, model->config().heads)),
      seed_(seed),
      device_(device) {}

StatusOr<std::unique_ptr<SafDriver>> SafDriver::Create(const SafOptions& options, GptImpl* model,
                                                       const TokenSpan& split, int64_t total_steps,
                                                       uint64_t seed, torch::Device device) {
  std::unique_ptr<SafDriver> d(new SafDriver(options, model, split, total_steps, seed, device));
  const int64_t L = model->config().layers, H = model->config().heads;
  if (!options.heads.empty()) {
    auto heads = ParseHeadList(options.heads, L, H);
    if (!heads.ok()) return heads.status();
    d->prescribed_ = *heads;
    d->k_ = int64_t(d->prescribed_.size());
  }
  if (split.size <= model->config().context)
    return Status::InvalidArgument("saf: the calibration split is shorter than one context window");
  ControllerOptions c;
  c.first_step = OneTimeStep(options.tau_start, total_steps);
  c.last_step = OneTimeStep(options.tau_end, total_steps);
  c.group_heads = options.group_heads > 0
                      ? options.group_heads
                      : std::max<int64_t>(1, std::llround(kDefaultGroupFraction * double(L * H)));
  c.max_heads = d->k_;
  const int64_t cadence = std::max<int64_t>(1, total_steps / kDefaultCadenceDivisor);
  switch (options.schedule) {
    case ScheduleKind::kOneTime:
      d->steps_ = {OneTimeStep(options.tau, total_steps)};
      break;
    case ScheduleKind::kGradual:
      d->steps_ = GradualSteps(options.tau_start, options.tau_end, options.groups, total_steps);
      break;
    case ScheduleKind::kValidationBudget:
      d->budget_ = std::make_unique<ValidationBudgetController>(
          c, options.budget, options.check_every > 0 ? options.check_every : cadence);
      break;
    case ScheduleKind::kTrainLoss: {
      const int64_t w = options.window > 0 ? options.window : std::max<int64_t>(2, cadence);
      d->train_loss_ = std::make_unique<TrainLossController>(c, options.z, w, kRecoveryWindows * w);
      break;
    }
  }
  return StatusOr<std::unique_ptr<SafDriver>>(std::move(d));
}

StatusOr<TokenSpan> CalibrationSplit(const SafOptions& o, const Dataset& data,
                                     const std::string& file) {
  if (o.calib_split == "val") return data.val;
  if (o.calib_split != "calib") return data.train;
  if (data.calib.size == 0)
    return Status::InvalidArgument(file +
                                   ": $.config.saf.calib_split: \"calib\" needs a "
                                   "calibration split: set data.calib_fraction > 0");
  return data.calib;
}

uint64_t EventSeed(uint64_t seed, int64_t event) {
  return seed + 0x9E3779B97F4A7C15ULL * uint64_t(event + 1);
}

InterventionInputs EventInputs(const SafOptions& o, GptImpl* model, const TokenSpan& split,
                               uint64_t seed, int64_t event, torch::Device device) {
  const int64_t L = model->config().layers, context = model->config().context;
  InterventionInputs in;
  in.view = ViewOfGpt(*model);
  for (int64_t l = 0; l < L; ++l) in.layers.push_back(model->attention(l).get());
  // Each event draws its own calibration sequences from a generator of its own.
  const uint64_t event_seed = EventSeed(seed, event);
  in.calibration =
      DrawCalibrationBatches(split, context, o.calib_sequences, o.calib_batch, event_seed, device);
  if (NeedsOutputPass(o.score))
    in.output_calibration =
        DrawCalibrationBatches(split, context, o.output_sequences, o.calib_batch,
                               event_seed ^ kOutputCalibrationSalt, device);
  // The random control draws per run unless saf.selection_seed fixes it (App. C.3.1).
  in.selection_seed = o.selection_seed >= 0 ? uint64_t(o.selection_seed) : seed;
  in.event = event;
  return in;
}

StatusOr<std::vector<HeadId>> SelectFirstEventHeads(const SafOptions& o, GptImpl* model,
                                                    const TokenSpan& split, uint64_t seed,
                                                    torch::Device device) {
  if (NeedsGradientEma(o.score))
    return Status::InvalidArgument(std::string("saf.score ") + ScoreKindName(o.score) +
                                   " needs the training loop's gradient EMA: it cannot select "
                                   "heads at a run's start");
  if (split.size <= model->config().context)
    return Status::InvalidArgument("saf: the calibration split is shorter than one context window");
  const int64_t L = model->config().layers, H = model->config().heads;
  InterventionInputs in = EventInputs(o, model, split, seed, 0, device);
  in.k = TargetHeadCount(o.rate, L, H);
  if (!o.heads.empty()) {
    auto heads = ParseHeadList(o.heads, L, H);
    if (!heads.ok()) return heads.status();
    in.prescribed = *heads;
  }
  in.install = false;
  auto r = RunIntervention(o, in);
  if (!r.ok()) return r.status();
  return r->installed;
}

StatusOr<InterventionResult> SafDriver::Run(int64_t step, int64_t k,
                                            const std::vector<HeadId>& prescribed, bool install) {
  InterventionInputs in = EventInputs(options_, model_, split_, seed_, events_, device_);
  in.gradient = ema_.empty() ? nullptr : &ema_;
  in.k = k;
  in.prescribed = prescribed;
  in.step = step;
  in.install = install;
  auto r = RunIntervention(options_, in);
  if (r.ok() && install) {
    ++events_;
    installed_.insert(installed_.end(), r->installed.begin(), r->installed.end());
    last_group_ = r->installed;
  }
  return r;
}

void SafDriver::Revert(const std::vector<HeadId>& heads) {
  for (const HeadId& u : heads) {
    RevertToOrdinary(*model_->attention(u.layer), u.head);
    installed_.erase(std::remove(installed_.begin(), installed_.end(), u), installed_.end());
  }
}

Status SafDriver::BeforeUpdate(int64_t step, const std::function<double()>& eval_loss,
                               std::vector<InterventionReport>* reports) {
  if (!Active(options_)) return Status::Ok();
  // One-time and gradual: every scheduled step that has come (several groups may share a
  // step when the run is short).
  while (next_ < steps_.size() && steps_[next_] <= step) {
    if (options_.schedule == ScheduleKind::kGradual && groups_.empty()) {
      // The ordered final set F, chosen and fitted once; groups are re-fitted at their event.
      auto final_set = Run(step, k_, prescribed_, /*install=*/false);
      if (!final_set.ok()) return final_set.status();
      groups_ = SplitIntoGroups(final_set->installed, int64_t(steps_.size()));
    }
    StatusOr<InterventionResult> r =
        options_.schedule == ScheduleKind::kGradual
            ? (next_ < groups_.size() ? Run(step, 0, groups_[next_], true)
                                      : StatusOr<InterventionResult>(InterventionResult{}))
            : Run(step, k_, prescribed_, true);
    if (!r.ok()) return r.status();
    if (!r->installed.empty()) reports->push_back(r->report);
    ++next_;
  }
  if (budget_ && budget_->ShouldPropose(step)) {
    const int64_t n = budget_->NextGroupSize();
    const double before = eval_loss();
    auto r = Run(step, n, {}, true);
    if (!r.ok()) {  // no further head fits: the controller is done
      budget_->Stop();
      return Status::Ok();
    }
    const double after = eval_loss();
    if (!budget_->Report(before, after, int64_t(r->installed.size()))) Revert(r->installed);
    reports->push_back(r->report);
  }
  return Status::Ok();
}

void SafDriver::AfterBackward() {
  if (!Active(options_) || !needs_gradients()) return;
  ema_.Update(QkGradientNorms(ViewOfGpt(*model_)));
}

Status SafDriver::AfterUpdate(int64_t step, double loss, std::vector<InterventionReport>* reports) {
  if (!Active(options_) || !train_loss_) return Status::Ok();
  switch (train_loss_->Observe(step, loss)) {
    case TrainLossController::Action::kNone:
      break;
    case TrainLossController::Action::kPropose: {
      auto r = Run(step, train_loss_->NextGroupSize(), {}, true);
      if (!r.ok()) {
        train_loss_->Stop();
        break;
      }
      train_loss_->Installed(int64_t(r->installed.size()));
      reports->push_back(r->report);
      break;
    }
    case TrainLossController::Action::kUndo:
      Revert(last_group_);
      break;
  }
  return Status::Ok();
}

namespace {

Json HeadsJson(const std::vector<HeadId>& heads) {
  Json a = Json::array();
  for (const HeadId& u : heads) a.push_back({u.layer, u.head});
  return a;
}

std::vector<HeadId> HeadsOf(const Json& a) {
  std::vector<HeadId> out;
  for (const Json& u : a) out.push_back(HeadId{u.at(0).get<int64_t>(), u.at(1).get<int64_t>()});
  return out;
}

}  // namespace

Json SafDriver::SaveState() const {
  Json groups = Json::array();
  for (const auto& g : groups_) groups.push_back(HeadsJson(g));
  Json j = {{"events", events_},
            {"installed", HeadsJson(installed_)},
            {"last_group", HeadsJson(last_group_)},
            {"next", next_},
            {"groups", groups},
            {"ema_updates", ema_.updates()},
            {"ema", ema_.scores()}};
  if (budget_) j["validation_budget"] = budget_->SaveState();
  if (train_loss_) j["train_loss"] = train_loss_->SaveState();
  return j;
}

Status SafDriver::LoadState(const Json& j) {
  try {
    events_ = j.at("events").get<int64_t>();
    installed_ = HeadsOf(j.at("installed"));
    last_group_ = HeadsOf(j.at("last_group"));
    next_ = j.at("next").get<size_t>();
    groups_.clear();
    for (const Json& g : j.at("groups")) groups_.push_back(HeadsOf(g));
    ema_.Restore(j.at("ema_updates").get<int64_t>(), j.at("ema").get<std::vector<double>>());
    if (next_ > steps_.size())
      return Status::Corruption("saf state: " + std::to_string(next_) +
                                " scheduled events done of " + std::to_string(steps_.size()));
    const int64_t L = model_->config().layers, H = model_->config().heads;
    for (const HeadId& u : installed_)
      if (u.layer < 0 || u.layer >= L || u.head < 0 || u.head >= H)
        return Status::Corruption("saf state: installed head out of range");
    if (budget_) HEADLAB_RETURN_IF_ERROR(budget_->LoadState(j.at("validation_budget")));
    if (train_loss_) HEADLAB_RETURN_IF_ERROR(train_loss_->LoadState(j.at("train_loss")));
  } catch (const Json::exception& e) {
    return Status::Corruption(std::string("saf state: ") + e.what());
  }
  return Status::Ok();
}

}  // namespace headlab::saf
