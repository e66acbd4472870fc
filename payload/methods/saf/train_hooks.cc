// The SAF method's training-loop hooks (payload/exec/train_hooks.h).
#include "payload/methods/saf/train_hooks.h"

#include <algorithm>
#include <cstdio>

#include "common/files.h"
#include "common/log.h"
#include "common/sha256.h"
#include "payload/exec/model.h"
#include "payload/methods/saf/saf_method.h"
#include "payload/methods/saf/saf_metrics.h"

namespace headlab {
namespace saf {
namespace {

using HeadKey = std::pair<int64_t, int64_t>;

// The role head h of `layer` has now, as the head_maps table names it.
std::string RoleOf(const HybridAttentionImpl& layer, int64_t h) {
  return HeadModeName(layer.head_states()[size_t(h)].mode);
}

int64_t CountHeads(Gpt& model, HeadMode mode) {
  int64_t n = 0;
  for (int64_t l = 0; l < model->config().layers; ++l)
    for (const HeadState& s : model->attention(l)->head_states()) n += s.mode == mode;
  return n;
}

Json HeadPairs(const std::vector<HeadKey>& heads) {
  Json a = Json::array();
  for (const auto& [l, h] : heads) a.push_back({l, h});
  return a;
}

}  // namespace

SafHooks::SafHooks(const SafOptions& options, std::string file)
    : options_(options), file_(std::move(file)) {}

Status SafHooks::OnStart(TrainContext& ctx, const std::optional<std::string>& saved,
                         Json* provenance) {
  // Calibration draws from its own generator over the configured split (App. C.1): the
  // training sampler is neither used nor advanced.
  StatusOr<TokenSpan> split = CalibrationSplit(options_, ctx.data, file_);
  if (!split.ok()) return split.status();
  if (options_.schedule == ScheduleKind::kValidationBudget &&
      (ctx.data.calib.size <= ctx.config.model.context || !ctx.controller_loss))
    return Status::InvalidArgument(file_ +
                                   ": $.config.saf.schedule: \"validation_budget\" selects on a "
                                   "controller split of its own, never the reporting batches: set "
                                   "data.calib_fraction > 0");
  const uint64_t seed = DrawSeed(ctx.config_json, ctx.config.seed);
  auto driver = SafDriver::Create(options_, ctx.model.get(), split.value(), ctx.config.train.steps,
                                  seed, ctx.device);
  if (!driver.ok())
    return Status::InvalidArgument(file_ + ": $.config.saf: " + driver.status().message());
  driver_ = std::move(driver.value());
  (*provenance)["saf_draw_seed"] = std::to_string(seed);  // decimal: exact beyond 2^53
  (*provenance)["saf_calib_split"] = options_.calib_split;
  if (!saved) return Status::Ok();
  StatusOr<Json> state = ParseJson(*saved, "checkpoint: method.saf");
  if (!state.ok()) return state.status();
  try {
    HEADLAB_RETURN_IF_ERROR(driver_->LoadState(state->at("driver")));
    published_ = state->at("published").get<int64_t>();
    last_installed_ = state->at("last_installed").get<int64_t>();
    const Json& c = state->at("cost_s");
    cost_.calibration_s = c.at("calibration").get<double>();
    cost_.ranking_s = c.at("ranking").get<double>();
    cost_.fitting_s = c.at("fitting").get<double>();
    cost_.installation_s = c.at("installation").get<double>();
    fits_run_ = state->at("fits_run").get<int64_t>();
    fits_rejected_ = state->at("fits_rejected").get<int64_t>();
    fit_kl_.clear();
    for (const Json& f : state->at("fit_kl"))
      fit_kl_[{f.at(0).get<int64_t>(), f.at(1).get<int64_t>()}] = f.at(2).get<double>();
    last_event_ = state->at("last_event");
    last_event_step_ = state->at("last_event_step").get<int64_t>();
    // The checkpoint restore re-created the trainable alpha/rho in their optimiser slots
    // (checkpoint.cc head_states): take them back as this run's trainable heads.
    trainable_.clear();
    for (const Json& pair : state->at("trainable")) {
      const int64_t l = pair.at(0).get<int64_t>(), h = pair.at(1).get<int64_t>();
      if (l < 0 || l >= ctx.model->config().layers || h < 0 ||
          h >= ctx.model->attention(l)->heads() || !ctx.model->attention(l)->fixed_trainable(h))
        return Status::Corruption("checkpoint: method.saf: head " + std::to_string(l) + "." +
                                  std::to_string(h) +
                                  " is listed trainable but the model's is not");
      trainable_.emplace_back(l, h);
    }
  } catch (const Json::exception& e) {
    return Status::Corruption(std::string("checkpoint: method.saf: ") + e.what());
  }
  (*provenance)["saf_resumed_events"] = published_;
  return Status::Ok();
}

Status SafHooks::RunDue(TrainContext& ctx) {
  std::vector<InterventionReport> reports;
  // The validation-budget controller's paired losses on a partition of its own (App. A.3):
  // the calibration split, never the reporting batches (OnStart requires it).
  const int64_t batches = ctx.config.train.eval_batches;
  HEADLAB_RETURN_IF_ERROR(driver_->BeforeUpdate(
      ctx.step, [&]() { return ctx.controller_loss(batches); }, &reports));
  return Publish(ctx, std::move(reports));
}

Status SafHooks::BeforeUpdate(TrainContext& ctx, const torch::Tensor&) { return RunDue(ctx); }

Status SafHooks::AfterBackward(TrainContext&) {
  driver_->AfterBackward();
  return Status::Ok();
}

Status SafHooks::AfterUpdate(TrainContext& ctx, double loss) {
  // (The loop has already synced trainable alpha/rho into the buffers, App. C.3.2.)
  std::vector<InterventionReport> reports;
  HEADLAB_RETURN_IF_ERROR(driver_->AfterUpdate(ctx.step, loss, &reports));
  return Publish(ctx, std::move(reports));
}

Status SafHooks::AfterTraining(TrainContext& ctx) { return RunDue(ctx); }

Status SafHooks::Publish(TrainContext& ctx, std::vector<InterventionReport> reports) {
  const int64_t installed = driver_->heads_installed();
  if (reports.empty() && installed == last_installed_) return Status::Ok();
  std::vector<Json> events;
  for (InterventionReport& r : reports) {
    // A controller may have undone the group already: roles come from the layers as they
    // are now, so head_maps never shows a reverted head as fixed.
    for (HeadMapRow& row : r.head_map) {
      row.role = RoleOf(*ctx.model->attention(row.layer), row.head);
      if (row.fit_kl && row.role != "ordinary") fit_kl_[{row.layer, row.head}] = *row.fit_kl;
    }
    cost_.calibration_s += r.cost.calibration_s;
    cost_.ranking_s += r.cost.ranking_s;
    cost_.fitting_s += r.cost.fitting_s;
    cost_.installation_s += r.cost.installation_s;
    fits_run_ += r.fits_run;
    fits_rejected_ += r.fits_rejected;
    events.push_back(ToJson(r));
  }
  if (reports.empty() && last_event_.is_object()) {
    // The train-loss controller undid its last increment without a report of its own.
    Json undo = last_event_;
    undo["undo"] = true;
    undo["step"] = ctx.step;
    undo["k"] = 0;
    undo["cost_s"] = {{"calibration", 0.0},
                      {"ranking", 0.0},
                      {"fitting", 0.0},
                      {"installation", 0.0},
                      {"total", 0.0}};
    undo["fits"] = {{"run", 0}, {"rejected", 0}};
    for (Json& row : undo["head_map"])
      row["role"] =
          RoleOf(*ctx.model->attention(row["layer"].get<int64_t>()), row["head"].get<int64_t>());
    events.push_back(undo);
  }
  last_installed_ = installed;
  if (!events.empty()) ++ctx.interventions;  // the layers re-plan (train_hooks.h)
  if (options_.trainable) HEADLAB_RETURN_IF_ERROR(AddTrainable(ctx));
  for (Json& e : events) {
    e["event_index"] = published_;
    e["cost_s_total_so_far"] = cost_.total_s();
    char name[40];
    std::snprintf(name, sizeof name, "saf_event_%lld.json", static_cast<long long>(published_));
    const std::string path = ctx.out_dir + "/" + name;
    const std::string bytes = e.dump(1) + "\n";
    HEADLAB_RETURN_IF_ERROR(WriteFileAtomic(path, bytes));
    ctx.events->Artifact("saf_head_map", path, Sha256Hex(bytes), bytes.size(), ctx.step);
    ++published_;
    last_event_ = e;
    last_event_step_ = ctx.step;
    const Json& c = e["cost_s"];
    LogInfo("saf: event " + std::to_string(published_ - 1) + " at step " +
            std::to_string(ctx.step) + ": " + std::to_string(e["k"].get<int64_t>()) +
            " heads, cost " + std::to_string(c["total"].get<double>()) + " s");
  }
  // The running totals as metrics at the event's step (once per step: a metric key
  // repeats at no step).
  if (ctx.step == last_metric_step_) return Status::Ok();
  last_metric_step_ = ctx.step;
  Json values;
  HEADLAB_RETURN_IF_ERROR(Summarize(ctx, &values));
  for (const auto& [key, value] : values.items())
    ctx.events->Metric(ctx.step, key, value.get<double>());
  return Status::Ok();
}

Status SafHooks::AddTrainable(TrainContext& ctx) {
  // AdamW at the model learning rate and betas, zero weight decay, moments starting at zero
  // (App. C.3.2): the loop's no-decay group has exactly those options, and AdamW creates a
  // parameter's state at its first step.
  std::vector<torch::Tensor> added;
  for (const HeadId& u : driver_->installed()) {
    HybridAttentionImpl& layer = *ctx.model->attention(u.layer);
    const HeadState& s = layer.head_states()[size_t(u.head)];
    if (s.mode != HeadMode::kFixed || s.dense || layer.fixed_trainable(u.head)) continue;
    auto [alpha, rho] = layer.MakeFixedTrainable(u.head);
    added.push_back(alpha);
    added.push_back(rho);
    trainable_.emplace_back(u.layer, u.head);
  }
  if (added.empty()) return Status::Ok();
  auto& groups = ctx.optimizer->param_groups();
  for (auto& g : groups) {
    if (static_cast<torch::optim::AdamWOptions&>(g.options()).weight_decay() != 0) continue;
    for (torch::Tensor& t : added) g.params().push_back(t);
    return Status::Ok();
  }
  if (groups.empty()) return Status::Internal("saf.trainable: the optimiser has no groups");
  auto options = std::make_unique<torch::optim::AdamWOptions>(
      static_cast<torch::optim::AdamWOptions&>(groups[0].options()));
  options->weight_decay(0.0);
  ctx.optimizer->add_param_group(torch::optim::OptimizerParamGroup(added, std::move(options)));
  return Status::Ok();
}

Status SafHooks::Summarize(TrainContext& ctx, Json* values) {
  Json& v = *values;
  v[metric::kSafHeadsFixed] = double(CountHeads(ctx.model, HeadMode::kFixed));
  v[metric::kSafHeadsPruned] = double(CountHeads(ctx.model, HeadMode::kPruned));
  if (options_.trainable) v[metric::kSafHeadsTrainable] = double(trainable_.size());
  v[metric::kSafEvents] = double(published_);
  if (last_event_step_ >= 0) v[metric::kSafEventStep] = double(last_event_step_);
  v[metric::kSafCostCalibrationS] = cost_.calibration_s;
  v[metric::kSafCostRankingS] = cost_.ranking_s;
  v[metric::kSafCostFittingS] = cost_.fitting_s;
  v[metric::kSafCostInstallationS] = cost_.installation_s;
  v[metric::kSafCostTotalS] = cost_.total_s();
  v[metric::kSafFitsRun] = double(fits_run_);
  v[metric::kSafFitsRejected] = double(fits_rejected_);
  if (last_event_.is_object()) {
    const Json& overlap = last_event_.value("overlap_variance", Json());
    if (overlap.is_number()) v[metric::kSafOverlapVariance] = overlap.get<double>();
    const Json& spread = last_event_.value("variance_spread", Json());
    if (spread.is_object() && spread.contains("within_share"))
      v[metric::kSafVarianceWithinShare] = spread["within_share"].get<double>();
  }
  // Fit KLs of the heads installed now (a reverted head's fit no longer counts).
  double kl_max = 0, kl_sum = 0;
  int64_t n = 0;
  for (const HeadId& u : driver_->installed()) {
    auto it = fit_kl_.find({u.layer, u.head});
    if (it == fit_kl_.end()) continue;
    kl_max = std::max(kl_max, it->second);
    kl_sum += it->second;
    ++n;
  }
  if (n > 0) {
    v[metric::kSafFitKlMax] = kl_max;
    v[metric::kSafFitKlMean] = kl_sum / double(n);
  }
  return Status::Ok();
}

std::string SafHooks::SaveState(TrainContext&) {
  Json fits = Json::array();
  for (const auto& [key, kl] : fit_kl_) fits.push_back({key.first, key.second, kl});
  Json state = {{"driver", driver_->SaveState()},
                {"published", published_},
                {"last_installed", last_installed_},
                {"cost_s",
                 {{"calibration", cost_.calibration_s},
                  {"ranking", cost_.ranking_s},
                  {"fitting", cost_.fitting_s},
                  {"installation", cost_.installation_s}}},
                {"fits_run", fits_run_},
                {"fits_rejected", fits_rejected_},
                {"fit_kl", fits},
                {"last_event", last_event_},
                {"last_event_step", last_event_step_},
                {"trainable", HeadPairs(trainable_)}};
  return CanonicalJson(state);
}

}  // namespace saf

StatusOr<std::shared_ptr<TrainHooks>> MakeSafHooks(const ExecConfig& config, const Json& c,
                                                   const std::string& file) {
  auto options = saf::SafOptionsFromJson(c, file);
  if (!options.ok()) return options.status();
  if (!saf::Active(*options)) return std::shared_ptr<TrainHooks>();
  if (options->trainable && !saf::TrainablePatternOk(*options))
    return Status::InvalidArgument(
        file +
        ": $.config.saf.trainable: 1 needs compact patterns (saf.method replace with "
        "saf.pattern mean and saf.storage compact, or structured_random)");
  if (!options->heads.empty()) {
    auto heads = saf::ParseHeadList(options->heads, config.model.layers, config.model.heads);
    if (!heads.ok())
      return Status::InvalidArgument(file + ": $.config.saf.heads: " + heads.status().message());
  }
  return std::shared_ptr<TrainHooks>(std::make_shared<saf::SafHooks>(*options, file));
}

}  // namespace headlab
