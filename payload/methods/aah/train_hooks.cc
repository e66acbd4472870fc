// The AAH-v3 method's training-loop hooks (payload/exec/train_hooks.h): the controller picks
// each head's window before an update (AAH §5.3-5.8), the rows and summary carry ACR, exact
// coverage, levels used and the window buckets (§5.10, §7.4, §7.6), the execution backend
// is labelled (§7.7), and the final windows become the aah_head_maps artifact.
#include <memory>
#include <optional>

#include "common/files.h"
#include "common/log.h"
#include "common/sha256.h"
#include "payload/exec/attention_cuda.h"
#include "payload/exec/precision.h"
#include "payload/exec/train_hooks.h"
#include "payload/methods/aah/aah_method.h"
#include "payload/methods/aah/aah_metrics.h"
#include "payload/methods/aah/aah_model.h"
#include "payload/methods/aah/aah_options.h"
#include "payload/methods/aah/aah_report.h"

namespace headlab {
namespace {

class AahHooks : public TrainHooks {
 public:
  explicit AahHooks(const aah::AahOptions& o) : options_(o) {}

  const char* name() const override { return "aah"; }

  Status OnStart(TrainContext& ctx, const std::optional<std::string>& saved,
                 Json* provenance) override {
    const ModelConfig& m = ctx.config.model;
    // Scorer weights and the random controls derive from the run seed (§5.7).
    controller_ = std::make_unique<aah::AahController>(options_, int(m.layers), int(m.heads),
                                                       uint64_t(ctx.config.seed));
    if (saved) {
      // A resume of this run: the scorers, EMAs, topology cache and windows come back, and
      // the windows are installed before the first update (the checkpoint's head states
      // hold them too; installing again keeps the two from drifting apart).
      HEADLAB_RETURN_IF_ERROR(
          controller_->LoadState(*saved, ctx.out_dir + ": checkpoint aah state"));
      aah::ApplyWindows(*ctx.model, controller_->windows());
    }
    backend_ = aah::ExecutionBackendOf(*ctx.model, ctx.device, ctx.config.train.batch_size);
    // The controller moves heads between full attention (SDPA) and local windows: SDPA's
    // plans for every head count are built now, before the loop times its updates, instead
    // of at the control updates that meet each count first (attention_cuda.h).
    if (controller_->MovesWindows()) {
      const double s =
          PrepareSdpaHeadCounts(*ctx.model->attention(0), ctx.config.train.batch_size, m.context,
                                ComputeDtype(ctx.model->precision()), ctx.device, m.pos == "rope");
      if (s > 0) {
        LogInfo("aah: SDPA's plans for 1-" + std::to_string(m.heads) + " heads built in " +
                std::to_string(s) + " s");
        (*provenance)["aah.sdpa_prepare_s"] = s;
      }
    }
    provenance->update(aah::ProvenanceFields(options_));
    provenance->update(aah::BackendProvenance(backend_));
    return Status::Ok();
  }

  Status BeforeUpdate(TrainContext& ctx, const torch::Tensor& x) override {
    // One rank observes in the update's forward; data-parallel ranks each see their own
    // rows there, so they observe the global batch in a separate pass and choose alike.
    const aah::Observation how =
        ctx.config.train.ranks > 1 ? aah::Observation::kSeparatePass : aah::Observation::kInForward;
    StatusOr<std::shared_ptr<aah::ControlRound>> round =
        aah::ControlStep(*controller_, *ctx.model, ctx.step, x, how);
    if (!round.ok()) return round.status();
    round_ = std::move(round.value());
    return Status::Ok();
  }

  // The round's observations ran in the update's forward; the controller reads them and
  // installs the windows of the next update here. Its seconds (the observations' device
  // time and the host's update: §5.3's features, scoring and hierarchy) are training time,
  // counted in train.tokens_per_s.
  Status AfterBackward(TrainContext& ctx) override {
    if (!round_) return Status::Ok();
    Status s = aah::FinishControl(*controller_, *ctx.model, round_.get());
    controller_s_ += round_->seconds;
    controller_host_s_ += round_->host_seconds;
    round_.reset();
    return s;
  }

  int64_t ControlPeriod() const override { return std::max<int64_t>(1, options_.control_every); }

  void LogRow(TrainContext& /*ctx*/, MetricRow* row) override {
    for (auto& kv : aah::TrainRowMetrics(*controller_)) row->push_back(std::move(kv));
    row->emplace_back(metric::kAahControllerS, controller_s_);
    row->emplace_back(metric::kAahControllerHostS, controller_host_s_);
  }

  // The loop's evaluation ran train.eval_batches forwards with the installed windows
  // fixed: each executed every head once. Branch usage is that of the latest evaluation,
  // so the summary's inference ACR is the final model's (Table 6).
  Status AfterEvaluate(TrainContext& ctx) override {
    eval_usage_ = aah::BranchUsage();
    eval_windows_ = aah::InstalledWindows(*ctx.model);
    for (int64_t b = 0; b < ctx.config.train.eval_batches; ++b) eval_usage_.Record(eval_windows_);
    backend_ = aah::ExecutionBackendOf(*ctx.model, ctx.device, ctx.config.train.batch_size);
    ctx.events->Metric(ctx.step, metric::kAahAcr,
                       aah::InferenceAcr(eval_usage_.Frequencies(), options_.context));
    return Status::Ok();
  }

  Status Summarize(TrainContext& ctx, Json* values) override {
    values->update(aah::SummaryValues(*controller_, eval_usage_));
    (*values)[metric::kAahControllerS] = controller_s_;
    (*values)[metric::kAahControllerHostS] = controller_host_s_;
    values->update(aah::BackendSummary(
        backend_, eval_windows_.empty() ? controller_->windows() : eval_windows_,
        options_.context));
    // aah_head_maps := {"head_maps": [{layer, head, role, score = c_tilde, window}]}.
    const std::string text = Json{{"head_maps", aah::FinalHeadMaps(*controller_)}}.dump() + "\n";
    const std::string path = ctx.out_dir + "/aah_head_maps.json";
    HEADLAB_RETURN_IF_ERROR(WriteFileAtomic(path, text));
    ctx.events->Artifact("aah_head_maps", path, Sha256Hex(text), text.size(), ctx.step);
    return Status::Ok();
  }

  std::string SaveState(TrainContext&) override { return controller_->SaveState(); }

 private:
  const aah::AahOptions options_;
  std::unique_ptr<aah::AahController> controller_;
  aah::ExecutionBackend backend_;
  aah::BranchUsage eval_usage_;               // of the latest evaluation
  aah::WindowMap eval_windows_;               // executed in the latest evaluation
  double controller_s_ = 0;                   // in control updates, this attempt
  double controller_host_s_ = 0;              // of which the host's updates
  std::shared_ptr<aah::ControlRound> round_;  // the update's, BeforeUpdate to AfterBackward
};

}  // namespace

StatusOr<std::shared_ptr<TrainHooks>> MakeAahHooks(const ExecConfig& config, const Json& c,
                                                   const std::string& file) {
  StatusOr<aah::AahOptions> o =
      aah::AahOptionsFromJson(c, config.model.context, config.train.warmup_steps, file);
  if (!o.ok()) return o.status();
  if (o->regime == aah::Regime::kOff) return std::shared_ptr<TrainHooks>();
  // The flops kind runs the hooks in its warm-up steps, so its counted steps execute the
  // controller's windows (the AAH FLOPs-boundary grids of experiments/measure/).
  if (config.kind != "train" && config.kind != "flops")
    return Status::InvalidArgument(
        file + ": $.config.aah.regime: AAH runs in kinds \"train\" and \"flops\" only, got \"" +
        config.kind + "\"");
  return std::shared_ptr<TrainHooks>(std::make_shared<AahHooks>(o.value()));
}

}  // namespace headlab
