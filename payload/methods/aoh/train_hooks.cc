// The AoH method's training-loop hooks (payload/exec/train_hooks.h): label the heads from
// the frozen weights at aoh.apply_step (then keep training with streaming heads) or after
// training, keep the labels across resumes, and evaluate every arm (full attention
// included) through the streaming decoder into the run's summary.
#include <optional>

#include "common/log.h"
#include "payload/exec/train_hooks.h"
#include "payload/methods/aoh/aoh_eval.h"
#include "payload/methods/aoh/aoh_method.h"
#include "payload/methods/aoh/aoh_metrics.h"
#include "payload/methods/aoh/aoh_options.h"
#include "payload/methods/aoh/aoh_report.h"

namespace headlab {
namespace {

class AohHooks : public TrainHooks {
 public:
  explicit AohHooks(aoh::AohRunConfig cfg) : cfg_(std::move(cfg)) {}

  const char* name() const override { return "aoh"; }

  // A resume of this run gets back the plan made at the conversion step: the checkpoint
  // already holds the head states, but the labels' scores and roles (head maps, anchor
  // map, retrieval counts) cannot be recomputed from the later weights.
  Status OnStart(TrainContext& ctx, const std::optional<std::string>& saved,
                 Json* provenance) override {
    if (!cfg_.bench_contexts.empty())
      (*provenance)["aoh_bench_device"] = aoh::DeviceLabel(ctx.device);
    if (!saved || saved->empty()) return Status::Ok();
    auto state = ParseJson(*saved, "checkpoint method state \"aoh\"");
    if (!state.ok()) return state.status();
    auto plan = aoh::PlanFromJson(state->value("plan", Json::object()), cfg_.options, *ctx.model);
    if (!plan.ok()) return plan.status();
    plan_ = std::move(plan.value());
    converted_at_ = state->value("converted_at", int64_t(-1));
    aoh::ApplyPlan(*ctx.model, *plan_);
    LogInfo("aoh: labels of step " + std::to_string(converted_at_) +
            " restored from the checkpoint");
    return Status::Ok();
  }

  // Converts before the first update at or after aoh.apply_step (a continuation whose
  // parent is already past it converts the parent's weights before its first update).
  Status BeforeUpdate(TrainContext& ctx, const torch::Tensor&) override {
    if (cfg_.enabled && !plan_ && cfg_.apply_step >= 0 && ctx.step >= cfg_.apply_step)
      return Convert(ctx);
    return Status::Ok();
  }

  // apply_step -1, or no update came after apply_step (a zero-step continuation: AoH
  // applied to a checkpoint): convert the final weights. The loop then evaluates and saves
  // the converted model.
  Status AfterTraining(TrainContext& ctx) override {
    if (cfg_.enabled && !plan_) return Convert(ctx);
    return Status::Ok();
  }

  Status Summarize(TrainContext& ctx, Json* values) override {
    const TrainConfig& t = ctx.config.train;
    const bool was_training = ctx.model->is_training();
    ctx.model->eval();
    torch::Tensor windows =
        aoh::EvalWindows(ctx.data.val, ctx.config.model.context, t.batch_size, t.eval_batches);
    // Passkey prompts in the model's token ids: an import's tokenizer, or the data's.
    PasskeyCodec passkey;
    if (!cfg_.passkey_lengths.empty()) {
      StatusOr<PasskeyCodec> codec =
          PasskeyCodec::For(ctx.config.model, ctx.data.has_meta ? &ctx.data.meta : nullptr);
      if (!codec.ok()) return codec.status();
      passkey = codec.value();
    }
    auto got = aoh::EvaluateAndReport(*ctx.model, cfg_, plan_ ? &*plan_ : nullptr, windows,
                                      t.batch_size, uint64_t(ctx.config.seed), ctx.step,
                                      ctx.out_dir, ctx.events, &passkey);
    ctx.model->train(was_training);
    if (!got.ok()) return got.status();
    for (auto it = got->begin(); it != got->end(); ++it) (*values)[it.key()] = it.value();
    if (converted_at_ >= 0) (*values)[metric::kAohConvertedAt] = converted_at_;
    return Status::Ok();
  }

  std::string SaveState(TrainContext&) override {
    if (!plan_) return "";
    return Json{{"converted_at", converted_at_}, {"plan", aoh::PlanJson(*plan_)}}.dump();
  }

 private:
  Status Convert(TrainContext& ctx) {
    auto plan = aoh::ConvertAndReport(*ctx.model, cfg_, ctx.step, ctx.events);
    if (!plan.ok()) return plan.status();
    plan_ = std::move(plan.value());
    converted_at_ = ctx.step;
    ++ctx.interventions;  // the layers re-plan (train_hooks.h)
    return Status::Ok();
  }

  const aoh::AohRunConfig cfg_;
  std::optional<aoh::AohPlan> plan_;
  int64_t converted_at_ = -1;  // the step whose weights labelled the heads
};

}  // namespace

// On when aoh.method labels heads, or when a full-attention arm (method none) asks for
// the AoH evaluation (passkey lengths or bench contexts), so it reports the same figures.
StatusOr<std::shared_ptr<TrainHooks>> MakeAohHooks(const ExecConfig& config, const Json& c,
                                                   const std::string& file) {
  auto cfg = aoh::AohRunConfigFromJson(c, file);
  if (!cfg.ok()) return cfg.status();
  if (!cfg->enabled && cfg->passkey_lengths.empty() && cfg->bench_contexts.empty())
    return std::shared_ptr<TrainHooks>();
  const TrainConfig& t = config.train;
  if (cfg->enabled && cfg->apply_step > t.steps && t.time_budget_s <= 0)
    return Status::InvalidArgument(file + ": $.aoh.apply_step: " + std::to_string(cfg->apply_step) +
                                   " is after the last step (" + std::to_string(t.steps) +
                                   "); -1 converts after training");
  if (cfg->options.rope_max_distance > 0 && config.model.pos != "rope")
    return Status::InvalidArgument(file +
                                   ": $.aoh.method: aoh_rope needs model.pos \"rope\", got \"" +
                                   config.model.pos + "\"");
  return std::shared_ptr<TrainHooks>(std::make_shared<AohHooks>(std::move(cfg.value())));
}

}  // namespace headlab
