// The pruning controls' training-loop hooks (payload/exec/train_hooks.h; SAF App. C.3.4):
// at the run's start (a continuation from a shared parent) or after a given update, the
// arm removes a given head set or the gate-Taylor selection (eq. 19) physically, keeps the
// retained AdamW state, and trains on with the smaller model. Heads named "pruned" in
// model.head_modes are only masked by the hybrid layer; this removes them.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/files.h"
#include "common/log.h"
#include "common/sha256.h"
#include "payload/exec/train_hooks.h"
#include "payload/methods/pruning/importance.h"
#include "payload/methods/pruning/physical.h"
#include "payload/methods/pruning/prune_method.h"
#include "payload/methods/pruning/prune_metrics.h"
#include "payload/methods/pruning/prune_options.h"
#include "payload/methods/saf/driver.h"

namespace headlab {
namespace {

std::string HeadList(const std::vector<HeadRef>& heads) {
  std::string s;
  for (const HeadRef& r : heads)
    s += (s.empty() ? "" : ",") + std::to_string(r.layer) + "." + std::to_string(r.head);
  return s;
}

class PruneHooks : public TrainHooks {
 public:
  PruneHooks(PruneOptions o, std::string file) : o_(std::move(o)), file_(std::move(file)) {}
  const char* name() const override { return "prune"; }

  Status OnStart(TrainContext& ctx, const std::optional<std::string>& saved,
                 Json* provenance) override {
    (*provenance)["prune_method"] = o_.method == PruneMethod::kHeads        ? "heads"
                                    : o_.method == PruneMethod::kGateTaylor ? "gate_taylor"
                                                                            : "saf";
    if (saved) {  // a resume: the checkpoint already holds the pruned shapes
      StatusOr<Json> j = ParseJson(*saved, "prune state");
      if (!j.ok()) return Status::Corruption(j.status().message());
      state_ = j.value();
      return Status::Ok();
    }
    if (o_.step < 0 || ctx.step >= o_.step) return Prune(ctx);
    return Status::Ok();
  }

  Status AfterUpdate(TrainContext& ctx, double) override {
    if (Done() || o_.step < 0 || ctx.step != o_.step) return Status::Ok();
    return Prune(ctx);
  }

  Status Summarize(TrainContext& ctx, Json* values) override {
    if (!Done()) return Status::Ok();
    (*values)[metric::kPruneHeadsRemoved] = state_.at("heads_removed").get<double>();
    (*values)[metric::kPruneKvHeadsRemoved] = state_.at("kv_heads_removed").get<double>();
    (*values)[metric::kPruneParams] = double(ParameterCount(ctx.model));
    (*values)[metric::kPruneParamsBefore] = state_.at("params_before").get<double>();
    (*values)[metric::kPruneStep] = state_.at("step").get<double>();
    for (const char* k : {metric::kPruneEvalLossBefore, metric::kPruneEvalLossAfter})
      if (state_.contains(k)) (*values)[k] = state_.at(k).get<double>();
    return Status::Ok();
  }

  std::string SaveState(TrainContext&) override {
    return CanonicalJson(state_.is_null() ? Json::object() : state_);
  }

 private:
  bool Done() const { return state_.is_object() && state_.contains("heads"); }

  // Selects the heads, removes them with their optimiser state, reports it.
  Status Prune(TrainContext& ctx) {
    const ModelConfig& m = ctx.config.model;
    std::vector<HeadRef> removed_before;
    for (int64_t l = 0; l < m.layers; ++l)
      for (int64_t h = 0; h < m.heads; ++h)
        if (ctx.model->attention(l)->removed(h)) removed_before.push_back({l, h});
    std::vector<HeadRef> heads = o_.heads;
    std::vector<std::vector<double>> importance;
    if (o_.method == PruneMethod::kGateTaylor) {
      const bool held_out = o_.calib_split == "calib";
      if (held_out && ctx.data.calib.size == 0)
        return Status::InvalidArgument(file_ +
                                       ": $.config.prune.calib_split: \"calib\" needs a "
                                       "calibration split: set data.calib_fraction > 0");
      // The windows SAF's first event of this run calibrates on (saf/driver.h EventSeed,
      // with their next tokens for the loss): "exactly the same held-out sequences as
      // variance selection" when prune.calib_sequences = saf.calib_sequences (App. C.3.4).
      const uint64_t seed = saf::EventSeed(saf::DrawSeed(ctx.config_json, ctx.config.seed), 0) ^
                            saf::kCalibrationSalt;
      std::vector<torch::Tensor> batches =
          CalibrationBatches(held_out ? ctx.data.calib : ctx.data.train, seed, m.context,
                             o_.calib_sequences, o_.calib_batch, ctx.device);
      importance = GateTaylorImportance(ctx.model, batches);
      heads = GateTaylorSelect(importance, PruneCount(o_.rate, m.layers * m.heads), removed_before);
    }
    if (o_.method == PruneMethod::kSaf) {
      // SAF's own selection with SAF's draws (saf/driver.h): the heads an saf.method
      // replace arm of this seed fixes from the same parent (SAF App. C.3.1).
      StatusOr<saf::SafOptions> so = saf::SafOptionsFromJson(ctx.config_json, file_);
      if (!so.ok()) return so.status();
      StatusOr<TokenSpan> split = saf::CalibrationSplit(so.value(), ctx.data, file_);
      if (!split.ok()) return split.status();
      StatusOr<std::vector<saf::HeadId>> picked =
          saf::SelectFirstEventHeads(so.value(), ctx.model.get(), split.value(),
                                     saf::DrawSeed(ctx.config_json, ctx.config.seed), ctx.device);
      if (!picked.ok())
        return Status::InvalidArgument(
            file_ + ": $.config.prune.method \"saf\": " + picked.status().message());
      heads.clear();
      for (const saf::HeadId& u : picked.value()) heads.push_back({u.layer, u.head});
      std::sort(heads.begin(), heads.end(), [](const HeadRef& a, const HeadRef& b) {
        return a.layer != b.layer ? a.layer < b.layer : a.head < b.head;
      });
    }
    const int64_t batches = ctx.config.train.eval_batches;
    const double loss_before = ctx.eval_loss(batches);
    const int64_t params_before = ParameterCount(ctx.model);
    RemovalCounts counts = RemoveHeadsPhysically(ctx.model, heads, ctx.optimizer.get());
    const double loss_after = ctx.eval_loss(batches);
    const int64_t params_after = ParameterCount(ctx.model);

    Json rows = Json::array();
    Json listed = Json::array();
    for (const HeadRef& r : heads) {
      Json row = {{"layer", r.layer}, {"head", r.head}, {"role", "pruned"}};
      if (!importance.empty()) row["score"] = importance[size_t(r.layer)][size_t(r.head)];
      rows.push_back(row);
      listed.push_back({r.layer, r.head});
    }
    char name[48];
    std::snprintf(name, sizeof name, "prune_head_map-%08lld.json",
                  static_cast<long long>(ctx.step));
    const std::string path = ctx.out_dir + "/" + name;
    const std::string bytes = CanonicalJson(Json{{"head_maps", rows}});
    HEADLAB_RETURN_IF_ERROR(WriteFileAtomic(path, bytes));
    ctx.events->Artifact("prune_head_map", path, Sha256Hex(bytes), bytes.size(), ctx.step);

    state_ = {{"heads", listed},
              {"heads_removed", counts.heads},
              {"kv_heads_removed", counts.kv_heads},
              {"params_before", params_before},
              {"step", ctx.step}};
    if (std::isfinite(loss_before)) state_[metric::kPruneEvalLossBefore] = loss_before;
    if (std::isfinite(loss_after)) state_[metric::kPruneEvalLossAfter] = loss_after;
    ctx.events->Metric(ctx.step, metric::kPruneHeadsRemoved, double(counts.heads));
    ctx.events->Metric(ctx.step, metric::kPruneParams, double(params_after));
    ctx.events->Metric(ctx.step, metric::kPruneEvalLossBefore, loss_before);
    ctx.events->Metric(ctx.step, metric::kPruneEvalLossAfter, loss_after);
    LogInfo("prune: removed " + std::to_string(counts.heads) + " heads (" + HeadList(heads) +
            ") and " + std::to_string(counts.kv_heads) + " kv heads at step " +
            std::to_string(ctx.step) + ": " + std::to_string(params_before) + " -> " +
            std::to_string(params_after) + " parameters, held-out loss " +
            std::to_string(loss_before) + " -> " + std::to_string(loss_after));
    ++ctx.interventions;  // the layers re-plan (train_hooks.h)
    return Status::Ok();
  }

  PruneOptions o_;
  std::string file_;  // names the config in errors
  Json state_;        // null until pruned (or restored)
};

}  // namespace

StatusOr<std::shared_ptr<TrainHooks>> MakePruneHooks(const ExecConfig& config,
                                                     const Json& config_json,
                                                     const std::string& file) {
  StatusOr<PruneOptions> o = PruneOptionsFromJson(config_json, config, file);
  if (!o.ok()) return o.status();
  if (o->method == PruneMethod::kNone) return std::shared_ptr<TrainHooks>();
  return std::shared_ptr<TrainHooks>(std::make_shared<PruneHooks>(o.value(), file));
}

}  // namespace headlab
