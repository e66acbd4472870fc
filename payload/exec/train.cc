// The training loop of run kind "train".
#include "payload/exec/train.h"

#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include <c10/core/DeviceGuard.h>
#include <torch/torch.h>

#include "common/files.h"
#include "common/log.h"
#include "common/metric_names.h"
#include "common/sha256.h"
#include "payload/exec/attention_cuda.h"
#include "payload/exec/bench_clock.h"
#include "payload/exec/checkpoint.h"
#include "payload/exec/data.h"
#include "payload/exec/device_copy.h"
#include "payload/exec/dist.h"
#include "payload/exec/grad_reducer.h"
#include "payload/exec/model.h"
#include "payload/exec/optimizer.h"
#include "payload/exec/passkey_prompts.h"
#include "payload/exec/replica_sync.h"
#include "payload/exec/retrieval_mix.h"
#include "payload/exec/run_setup.h"
#include "payload/exec/stop_flag.h"
#include "payload/exec/throughput.h"
#include "payload/exec/train_hooks.h"
#include "payload/exec/update_step.h"
#include "payload/exec/update_timer.h"

namespace headlab {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int64_t PeakRssBytes() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return int64_t(ru.ru_maxrss) * 1024;
}

// [B, T+1] row-major tokens -> inputs and next-token targets on `device`, without waiting
// for the device (`tokens` may go at once).
std::pair<torch::Tensor, torch::Tensor> ToBatch(std::vector<int64_t>& tokens, int64_t batch,
                                                int64_t context, torch::Device device) {
  torch::Tensor host = torch::from_blob(tokens.data(), {batch, context + 1}, torch::kLong);
  torch::Tensor t = ToDeviceAsync(host, device);
  return {t.narrow(1, 0, context), t.narrow(1, 1, context)};
}

// Per-token log-probabilities of the fixed evaluation batches of the held-out split, as
// one float32 vector in batch, row, position order (the logprobs artifact's layout). A
// batch holds the global batch's rows (ranks * batch_size), so a data-parallel run is
// evaluated on the same tokens as one process with the same global batch.
std::vector<float> EvalLogProbs(Gpt& model, const Dataset& data, const ExecConfig& c,
                                torch::Device device) {
  torch::NoGradGuard no_grad;
  std::vector<float> out;
  const int64_t rows = c.train.batch_size * c.train.ranks;
  for (int64_t b = 0; b < c.train.eval_batches; ++b) {
    std::vector<int64_t> tokens;
    EvalBatch(data.val, c.model.context, rows, b, c.train.eval_batches, &tokens);
    auto [x, y] = ToBatch(tokens, rows, c.model.context, device);
    torch::Tensor lp = model->TokenLogProbs(x, y).to(torch::kCPU, torch::kFloat).contiguous();
    out.insert(out.end(), lp.data_ptr<float>(), lp.data_ptr<float>() + lp.numel());
  }
  return out;
}

// Held-out loss on the first `batches` of `of` fixed evaluation batches of `split`, in eval
// mode; like EvalLogProbs, a batch holds the global batch's rows (the same on every rank).
double HeldOutLoss(Gpt& model, const TokenSpan& split, const ExecConfig& c, torch::Device device,
                   int64_t batches, int64_t of) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  double sum = 0;
  int64_t count = 0;
  const int64_t rows = c.train.batch_size * c.train.ranks;
  for (int64_t b = 0; b < batches; ++b) {
    std::vector<int64_t> tokens;
    EvalBatch(split, c.model.context, rows, b, of, &tokens);
    auto [x, y] = ToBatch(tokens, rows, c.model.context, device);
    torch::Tensor lp = model->TokenLogProbs(x, y);
    sum -= lp.sum().item<double>();
    count += lp.numel();
  }
  model->train(was_training);
  return sum / double(std::max<int64_t>(1, count));
}

// Calls `f` on every hook in order; stops at the first error.
template <typename F>
Status ForEachHook(const HookList& hooks, F f) {
  for (const std::shared_ptr<TrainHooks>& h : hooks) HEADLAB_RETURN_IF_ERROR(f(*h));
  return Status::Ok();
}

// Mean nats/token: -mean log p, accumulated in double.
double MeanNats(const std::vector<float>& logprobs) {
  double sum = 0;
  for (float v : logprobs) sum -= double(v);
  return sum / double(logprobs.size());
}

// logprobs artifact := float32 little-endian [eval_batches * batch_size * context]: log p of
// each held-out target token under the model at `step`, in EvalBatch order (batch, row,
// position). Paired comparisons and bootstraps are computed from these later.
Status SaveLogProbs(const std::string& out_dir, int64_t step, const std::vector<float>& lp,
                    EventSink* events) {
  char name[40];
  std::snprintf(name, sizeof name, "logprobs-%08lld.f32", static_cast<long long>(step));
  std::string path = out_dir + "/" + name;
  std::string bytes(reinterpret_cast<const char*>(lp.data()), lp.size() * sizeof(float));
  HEADLAB_RETURN_IF_ERROR(WriteFileAtomic(path, bytes));
  events->Artifact("logprobs", path, Sha256Hex(bytes), bytes.size(), step);
  return Status::Ok();
}

void SetLr(torch::optim::Optimizer& opt, double lr) {
  for (auto& g : opt.param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
}

}  // namespace

double ScheduledLr(const TrainConfig& t, double step) {
  if (step < double(t.warmup_steps)) return t.lr * (step + 1) / double(t.warmup_steps);
  const double min_lr = t.lr * t.min_lr_ratio;
  const int64_t decay_steps = std::max<int64_t>(1, t.steps - t.warmup_steps - 1);
  const double progress = std::min(1.0, (step - double(t.warmup_steps)) / double(decay_steps));
  return min_lr + 0.5 * (1.0 + std::cos(M_PI * progress)) * (t.lr - min_lr);
}

std::string CheckpointPath(const std::string& out_dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "ckpt-%08lld.pt", static_cast<long long>(step));
  return out_dir + "/" + name;
}

namespace {

// One attempt of a training run as named steps: SetUp (run_setup.h), Restore, StartMethods,
// then Step until KeepGoing says stop (with LogStep, Evaluate and Save on their schedules),
// then Finish. Rank 0 (the lead) alone reports events, evaluates and writes checkpoints.
class Trainer {
 public:
  Trainer(const TrainRequest& req, EventSink* events)
      : req_(req),
        c_(req.config),
        t_(req.config.train),
        events_(events),
        t0_(Clock::now()),
        world_(int(t_.ranks)),
        rank_(req.rank),
        lead_(req.rank == 0),
        timed_(t_.time_budget_s > 0) {}

  // Device by rank, data and its checks, the output folder, the data-parallel group (rank 0
  // launches its peers), the seeded model and its optimiser, the provenance so far.
  Status SetUp();
  // A continuation starts from its shared parent's checkpoint (how every paired comparison
  // is made) unless it already has a checkpoint of its own (a requeue, which wins).
  Status Restore();
  // The methods' OnStart, checked equal on every rank; then the provenance event.
  Status StartMethods();
  // True iff another update is due: train.steps not reached, or under a time budget the
  // predicted update fits in it (on every rank).
  bool KeepGoing();
  // One update: the methods' hooks around grad_accum micro-batches, the (all-reduced)
  // gradient and the optimiser step. Then the log, evaluation and checkpoint due at the new
  // step, except after the last step (Finish does those). *last: the last step was taken.
  Status Step(bool* last);
  // AfterTraining, the final evaluation, log-probs and checkpoint, and the summary.
  Status Finish();

 private:
  Status Evaluate();
  Status Save();
  void LogStep();
  Status SyncReplicas(const char* where);
  double TokensPerS() const;
  double Mfu() const;
  void AddThroughput(MetricRow* row) const;
  void AddDistMetrics(MetricRow* row) const;
  // Runs `call` (the hooks' BeforeUpdate or AfterUpdate) with the timer paused, and keeps
  // it paused when the hooks made an intervention; returns true iff they did.
  StatusOr<bool> TimeHooks(const std::function<Status()>& call);
  // After the update that re-planned for an intervention: records the layers' plans in
  // provenance, reopens the timer and starts the after-event window.
  void EndReplanningUpdate();

  // Constant after construction.
  const TrainRequest& req_;
  const ExecConfig& c_;
  const TrainConfig& t_;
  EventSink* const events_;
  const Clock::time_point t0_;  // the attempt's start: a time budget counts loading too
  const int world_, rank_;
  const bool lead_;   // reports events, evaluates, writes checkpoints
  const bool timed_;  // train.time_budget_s > 0

  // Set up by SetUp (in the order they must be torn down: the peers before the group).
  torch::Device device_{torch::kCPU};
  std::optional<c10::DeviceGuard> device_guard_;  // rank r's GPU is the current device
  Dataset data_;
  ReduceDtype reduce_dtype_ = ReduceDtype::kFp32;
  DataParallel dp_;
  ProcessGroup* group_ = nullptr;  // dp_.group; null for one rank
  Gpt model_{nullptr};
  std::unique_ptr<torch::optim::AdamW> opt_;
  std::unique_ptr<GradientReducer> reducer_;  // data parallel only
  std::unique_ptr<Updater> updater_;
  std::unique_ptr<ReplicaSync> replicas_;  // data parallel with methods
  std::unique_ptr<BatchSampler> sampler_;
  std::optional<RetrievalMix> mix_;  // data.retrieval_fraction > 0
  TrainProgress progress_;
  Json prov_;
  const std::optional<ResumePoint>* from_ = nullptr;  // the checkpoint restored, if any

  // Set by StartMethods.
  ExecConfig method_config_;
  std::string method_dir_;
  std::unique_ptr<TrainContext> ctx_;

  // The loop's state.
  int64_t tokens_per_step_ = 0;
  int64_t first_step_ = 0;  // progress_.step when the loop began
  Clock::time_point train_t0_;
  double eval_loss_ = std::nan("");
  double last_loss_ = std::nan("");
  int64_t logged_at_ = -1, evaluated_at_ = -1, saved_at_ = -1;
  std::vector<float> logprobs_;  // of the latest evaluation
  // Throughput (throughput.h): steady-state windows of updates; until the first window
  // closes (short runs), the attempt's updates over its wall time since the loop began.
  std::unique_ptr<UpdateTimer> timer_;
  double flops_per_token_ = 0, peak_flops_ = 0;
  torch::Tensor loss_, grad_norm_;  // of the latest update, on the device
  double lr_ = 0;
  double slowest_rank_s_ = 0;    // total over this attempt's updates
  double slowest_update_s_ = 0;  // the slowest single update so far
  // Interventions (train_hooks.h TrainContext::interventions).
  int64_t interventions_seen_ = 0;
  bool timer_held_ = false;    // paused for an intervention until the re-planning update ends
  bool replans_now_ = false;   // this update's forwards run the changed model first
  bool replan_next_ = false;   // an AfterUpdate intervention: the next update re-plans
  bool after_event_ = false;   // the window of train.tokens_per_s_after_event has begun
  double event_seconds0_ = 0;  // the timer's totals where that window began
  int64_t event_updates0_ = 0;
  Json attention_plans_ = Json::array();  // provenance: the layers' plans after each one
};

Status Trainer::SetUp() {
  HEADLAB_RETURN_IF_ERROR(PickDevice(t_, rank_, &device_));
  device_guard_.emplace(device_);
  StatusOr<Dataset> data = LoadRunData(c_);
  if (!data.ok()) return data.status();
  data_ = std::move(data.value());
  HEADLAB_RETURN_IF_ERROR(MakeDirs(req_.out_dir));
  StatusOr<ReduceDtype> reduce_dtype = ParseReduceDtype(t_.allreduce_dtype);
  if (!reduce_dtype.ok()) return reduce_dtype.status();
  reduce_dtype_ = *reduce_dtype;

  // Data parallel (dist.h): rank 0 launches its peers; every rank joins the group.
  StatusOr<DataParallel> dp =
      StartDataParallel(rank_, world_, req_.out_dir, req_.manifest_path, device_);
  if (!dp.ok()) return dp.status();
  dp_ = std::move(dp.value());
  group_ = dp_.group.get();

  Json init_prov = Json::object();  // model.init_from: the imported checkpoint
  StatusOr<Gpt> seeded = SeededModel(c_, &init_prov);
  if (!seeded.ok()) return seeded.status();
  model_ = *seeded;
  HEADLAB_RETURN_IF_ERROR(PlaceModel(model_, t_, device_));
  opt_ = MakeOptimizer(model_, t_);
  updater_ = std::make_unique<Updater>(model_, *opt_, t_, model_->precision(), device_);
  if (group_) {
    reducer_ = std::make_unique<GradientReducer>(*group_, reduce_dtype_);
    updater_->ReduceGradientsWith(reducer_.get());
    if (!req_.hooks.empty()) replicas_ = std::make_unique<ReplicaSync>(*group_);
  }
  sampler_ = std::make_unique<BatchSampler>(uint64_t(c_.seed), c_.model.context);
  if (c_.data.retrieval_fraction > 0) {
    // Passkey rows in the tokens the passkey evaluation uses (passkey_prompts.h).
    StatusOr<PasskeyCodec> codec =
        PasskeyCodec::For(c_.model, data_.has_meta ? &data_.meta : nullptr);
    if (!codec.ok())
      return Status::InvalidArgument("data.retrieval_tasks: " + codec.status().message());
    StatusOr<RetrievalMix> mix =
        RetrievalMix::Make(c_.data.retrieval_fraction, c_.data.retrieval_tasks, c_.model.context,
                           c_.model.vocab, uint64_t(c_.seed), codec.value());
    if (!mix.ok()) return mix.status();
    mix_ = std::move(mix.value());
  }

  prov_ = RunProvenance(model_, device_);
  prov_.update(DataProvenance(data_, c_));
  prov_["ranks"] = world_;
  if (group_) {
    prov_["dist_backend"] = group_->backend();
    prov_["allreduce_dtype"] = ReduceDtypeName(reduce_dtype_);
    prov_["allreduce_bucket_bytes"] = kGradientBucketBytes;
  }
  prov_.update(init_prov);
  return Status::Ok();
}

Status Trainer::Restore() {
  from_ = req_.resume ? &req_.resume : &req_.parent;
  const std::optional<ResumePoint>& from = *from_;
  if (from) {
    HEADLAB_RETURN_IF_ERROR(RestoreStartCheckpoint(*from, model_, *opt_, &progress_));
    HEADLAB_RETURN_IF_ERROR(sampler_->LoadState(progress_.sampler_state));
    if (progress_.loss_scale > 0)
      updater_->scaler().Restore(progress_.loss_scale, progress_.loss_scale_growth);
    // A continuation may change the optimisation settings (e.g. another arm's weight
    // decay): the config, not the checkpoint, decides them.
    auto& groups = opt_->param_groups();
    for (size_t i = 0; i < groups.size(); ++i)
      static_cast<torch::optim::AdamWOptions&>(groups[i].options())
          .betas({t_.beta1, t_.beta2})
          .weight_decay(i == 0 ? t_.weight_decay : 0.0);
    // The checkpoint restored the parent's head states; a continuation arm's own
    // model.head_modes (e.g. the heads it prunes) apply on top. A resume keeps its own.
    if (!req_.resume)
      for (const HeadAssignment& a : c_.model.head_modes)
        model_->attention(a.layer)->SetHeadState(a.head, a.state);
    prov_["resumed_from_step"] = progress_.step;
    LogInfo(std::string(req_.resume ? "resumed" : "continuing from parent") + " from " +
            from->path + " at step " + std::to_string(progress_.step));
  }
  if (req_.parent) {
    prov_["parent_run"] = req_.parent_run;
    prov_["parent_checkpoint_sha256"] = req_.parent->sha256;
    prov_["parent_checkpoint_path"] = req_.parent->path;
    prov_["parent_step"] = req_.parent->step;
  } else if (req_.resume) {
    prov_["parent_checkpoint_sha256"] = req_.resume->sha256;
    prov_["parent_checkpoint_path"] = req_.resume->path;
  }
  return Status::Ok();
}

Status Trainer::StartMethods() {
  // Methods see a data-parallel run as one process with the global batch (train_hooks.h):
  // the global micro-batch size, and on ranks > 0 a folder of their own for the artifacts
  // nobody reports (rank 0 alone reports).
  method_config_ = c_;
  method_config_.train.batch_size = t_.batch_size * world_;
  method_dir_ = lead_ ? req_.out_dir : req_.out_dir + "/rank-" + std::to_string(rank_);
  if (!lead_ && !req_.hooks.empty()) HEADLAB_RETURN_IF_ERROR(MakeDirs(method_dir_));
  ctx_.reset(new TrainContext{
      method_config_, req_.config_json, method_dir_, model_, opt_, data_, device_, events_,
      progress_.step,
      [this](int64_t batches) {
        return HeldOutLoss(model_, data_.val, c_, device_, batches, c_.train.eval_batches);
      },
      [this](int64_t batches) {
        if (data_.calib.size <= c_.model.context) return std::nan("");
        return HeldOutLoss(model_, data_.calib, c_, device_, batches, batches);
      }});
  // A method's own state comes back only on a resume of the same run: a continuation
  // from a parent starts its methods afresh.
  for (const std::shared_ptr<TrainHooks>& h : req_.hooks) {
    std::optional<std::string> saved;
    auto it = progress_.method_states.find(h->name());
    if (req_.resume && it != progress_.method_states.end()) saved = it->second;
    HEADLAB_RETURN_IF_ERROR(h->OnStart(*ctx_, saved, &prov_));
  }
  HEADLAB_RETURN_IF_ERROR(SyncReplicas("the methods' OnStart"));
  events_->Provenance(prov_);
  LogInfo("train: " + std::to_string(c_.model.layers) + " layers, " +
          std::to_string(c_.model.heads) + " heads, width " + std::to_string(c_.model.width) +
          ", context " + std::to_string(c_.model.context) + ", " + std::to_string(t_.steps) +
          " steps on " + device_.str() + " (" + std::to_string(torch::get_num_threads()) +
          " threads)");

  tokens_per_step_ = t_.batch_size * t_.grad_accum * c_.model.context * world_;
  first_step_ = progress_.step;
  train_t0_ = Clock::now();
  timer_ = std::make_unique<UpdateTimer>(device_);
  flops_per_token_ = ModelFlopsPerToken(c_.model);
  peak_flops_ = PeakFlops(DeviceLabel(device_), PrecisionName(model_->precision()));
  return Status::Ok();
}

// Every rank's methods must have made the same choices (replica_sync.h).
Status Trainer::SyncReplicas(const char* where) {
  return replicas_ ? replicas_->Sync(model_, updater_->InGradientOrder(), where, progress_.step)
                   : Status::Ok();
}

double Trainer::TokensPerS() const {
  if (timer_->updates() > 0)
    return double(timer_->updates() * tokens_per_step_) / timer_->seconds();
  double s = SecondsSince(train_t0_);
  return s > 0 ? double((progress_.step - first_step_) * tokens_per_step_) / s : 0.0;
}

StatusOr<bool> Trainer::TimeHooks(const std::function<Status()>& call) {
  const bool was_open = timer_->open();
  if (was_open)
    timer_->Pause(progress_.step);  // waits for the device: the hooks' work is timed apart
  const Clock::time_point h0 = Clock::now();
  HEADLAB_RETURN_IF_ERROR(call());
  const bool intervened = ctx_->interventions != interventions_seen_;
  interventions_seen_ = ctx_->interventions;
  if (intervened) {
    timer_held_ = timer_held_ || was_open;
  } else if (was_open) {
    // A method's recurring work (AAH's control updates, a schedule's checks) is training
    // time: counted. Device work the hooks left queued runs in the reopened window.
    timer_->Credit(SecondsSince(h0));
    timer_->Resume(progress_.step);
  }
  return intervened;
}

void Trainer::EndReplanningUpdate() {
  replans_now_ = false;
  if (lead_) {
    Json plan = AttentionPlanProvenance(model_);
    Json entry = {{"step", progress_.step}, {"interventions", ctx_->interventions}};
    entry.update(plan);
    attention_plans_.push_back(std::move(entry));
    // The latest paths are the run's (results shows them); attention_plans keeps each.
    plan["attention_plans"] = attention_plans_;
    events_->Provenance(plan);
  }
  if (timer_held_) {
    timer_->Pause(progress_.step);  // no window is open: waits for the device only
    timer_->Resume(progress_.step);
    timer_held_ = false;
  }
  after_event_ = true;
  event_seconds0_ = timer_->seconds();
  event_updates0_ = timer_->updates();
}

double Trainer::Mfu() const {
  return peak_flops_ > 0 ? flops_per_token_ * TokensPerS() / peak_flops_ : 0.0;
}

void Trainer::AddThroughput(MetricRow* row) const {
  row->emplace_back(metric::kTrainTokensPerS, TokensPerS());
  if (timer_->updates() > 0) row->emplace_back(metric::kTrainStepS, timer_->SecondsPerUpdate());
  const int64_t after = timer_->updates() - event_updates0_;
  if (after_event_ && after > 0)
    row->emplace_back(metric::kTrainTokensPerSAfterEvent,
                      double(after * tokens_per_step_) / (timer_->seconds() - event_seconds0_));
  if (Mfu() > 0) row->emplace_back(metric::kTrainMfu, Mfu());
  if (device_.is_cuda())
    row->emplace_back(metric::kGpuPeakMemBytes, double(DevicePeakMemoryBytes(device_)));
}

// Per update of this attempt: the communication the update waited for after its last
// backward (the all-reduce time not hidden behind backward) and the slowest rank's time.
void Trainer::AddDistMetrics(MetricRow* row) const {
  if (!group_) return;
  const double updates = double(std::max<int64_t>(1, progress_.step - first_step_));
  row->emplace_back(metric::kDistAllReduceS, reducer_->exposed_seconds() / updates);
  row->emplace_back(metric::kDistSlowestUpdateS, slowest_rank_s_ / updates);
}

Status Trainer::Evaluate() {
  if (!lead_) return Status::Ok();
  const bool was_open = timer_->open();
  timer_->Pause(progress_.step);
  logprobs_ = EvalLogProbs(model_, data_, c_, device_);
  eval_loss_ = MeanNats(logprobs_);
  evaluated_at_ = progress_.step;
  events_->Metric(progress_.step, metric::kEvalLoss, eval_loss_);
  events_->Metric(progress_.step, metric::kEvalPpl, std::exp(eval_loss_));
  LogInfo("step " + std::to_string(progress_.step) + ": eval loss " + std::to_string(eval_loss_) +
          " ppl " + std::to_string(std::exp(eval_loss_)));
  Status st = ForEachHook(req_.hooks, [&](TrainHooks& h) { return h.AfterEvaluate(*ctx_); });
  timer_->Pause(progress_.step);  // the hooks may have queued work too
  if (was_open) timer_->Resume(progress_.step);
  return st;
}

Status Trainer::Save() {
  if (!lead_) return Status::Ok();
  const bool was_open = timer_->open();
  timer_->Pause(progress_.step);
  progress_.sampler_state = sampler_->SaveState();
  if (updater_->scaler().enabled()) {
    progress_.loss_scale = updater_->scaler().scale();
    progress_.loss_scale_growth = updater_->scaler().growth_tracker();
  }
  progress_.method_states.clear();
  for (const std::shared_ptr<TrainHooks>& h : req_.hooks) {
    std::string state = h->SaveState(*ctx_);
    if (!state.empty()) progress_.method_states[h->name()] = std::move(state);
  }
  saved_at_ = progress_.step;
  Status st = SaveCheckpoint(req_.out_dir, req_.config_json, model_, *opt_, progress_, events_);
  if (was_open) timer_->Resume(progress_.step);
  return st;
}

void Trainer::LogStep() {
  last_loss_ = loss_.item<double>();
  timer_->Mark(progress_.step);
  if (!lead_) return;
  logged_at_ = progress_.step;
  const double norm = grad_norm_.item<double>();
  MetricRow row = {{metric::kTrainLoss, last_loss_},
                   {metric::kTrainLr, lr_},
                   {metric::kTrainGradNorm, norm},
                   {metric::kTrainTokens, double(progress_.step * tokens_per_step_)},
                   {metric::kElapsedS, SecondsSince(t0_)}};
  AddThroughput(&row);
  AddDistMetrics(&row);
  for (const std::shared_ptr<TrainHooks>& h : req_.hooks) h->LogRow(*ctx_, &row);
  for (const auto& [key, value] : row) events_->Metric(progress_.step, key, value);
  char line[200];
  std::snprintf(line, sizeof line, "step %lld/%lld loss %.4f lr %.2e grad %.3f %.0f tok/s MFU %.3f",
                static_cast<long long>(progress_.step), static_cast<long long>(t_.steps),
                last_loss_, lr_, norm, TokensPerS(), Mfu());
  LogInfo(line);
}

// Matched time (SAF App. C.3.3): the allowance runs from the start of this attempt
// (loading included) and the run stops before an update would exceed it, predicting an
// update's cost by the slowest one so far. The schedule then advances with elapsed time
// over what is left of the `steps`-long schedule, the same for every arm.
// Every rank must take the same number of updates: under a time budget any rank's
// "stop" stops them all (one max-reduction per update).
bool Trainer::KeepGoing() {
  bool go = timed_ ? SecondsSince(t0_) + slowest_update_s_ <= t_.time_budget_s
                   : progress_.step < t_.steps;
  if (group_ && timed_) {
    torch::Tensor stop =
        torch::full({1}, go ? 0.0f : 1.0f, torch::dtype(torch::kFloat).device(device_));
    group_->AllReduceMax(stop);
    go = stop.item<float>() == 0.0f;
  }
  return go;
}

Status Trainer::Step(bool* last) {
  TrainContext& ctx = *ctx_;
  if (StopRequested())
    return Status::Cancelled("stopped by signal at step " + std::to_string(progress_.step));
  const Clock::time_point u0 = Clock::now();
  const double at =
      timed_ ? double(first_step_) + std::min(1.0, SecondsSince(t0_) / t_.time_budget_s) *
                                         double(std::max<int64_t>(0, t_.steps - first_step_))
             : double(progress_.step);
  lr_ = ScheduledLr(t_, at);
  SetLr(*opt_, lr_);
  // Gradient accumulation: the update's loss is the mean over grad_accum micro-batches
  // (each scaled by 1/grad_accum before backward), drawn one after another from the
  // sampler, so it equals one batch of batch_size * grad_accum sequences up to rounding.
  ctx.step = progress_.step;
  torch::Tensor total;
  for (int64_t micro = 0; micro < t_.grad_accum; ++micro) {
    // Every rank draws the same global batch of world * batch_size rows and trains on
    // its own slice, so the data order does not depend on the number of ranks.
    std::vector<int64_t> tokens;
    sampler_->Next(data_.train, t_.batch_size * world_, &tokens, mix_ ? &*mix_ : nullptr);
    if (micro == 0) {
      // The methods see the whole global micro-batch on every rank; they may change the
      // model and the optimiser's tensors, so the update begins after them.
      if (!req_.hooks.empty()) {
        torch::Tensor gx = ToBatch(tokens, t_.batch_size * world_, c_.model.context, device_).first;
        StatusOr<bool> intervened = TimeHooks([&] {
          HEADLAB_RETURN_IF_ERROR(
              ForEachHook(req_.hooks, [&](TrainHooks& h) { return h.BeforeUpdate(ctx, gx); }));
          return SyncReplicas("the methods' BeforeUpdate");
        });
        if (!intervened.ok()) return intervened.status();
        replans_now_ = *intervened || replan_next_;
        replan_next_ = false;
      }
      updater_->Begin();
    }
    if (world_ > 1) {
      const size_t row = size_t(c_.model.context + 1) * size_t(t_.batch_size);
      tokens = std::vector<int64_t>(tokens.begin() + long(size_t(rank_) * row),
                                    tokens.begin() + long(size_t(rank_ + 1) * row));
    }
    auto [x, y] = ToBatch(tokens, t_.batch_size, c_.model.context, device_);
    torch::Tensor part = updater_->Accumulate(x, y);
    total = micro == 0 ? part : total + part;
  }
  loss_ = total;
  // Data parallel: the mean gradient over every rank's rows of everything the optimiser
  // updates (SAF App. C.5: communication is part of the update time), its buckets
  // all-reduced while the last backward ran; the methods read it afterwards.
  updater_->FinishGradients();
  HEADLAB_RETURN_IF_ERROR(
      ForEachHook(req_.hooks, [&](TrainHooks& h) { return h.AfterBackward(ctx); }));
  if (group_) {  // the mean loss
    group_->AllReduceSum(loss_);
    loss_.div_(double(world_));
  }
  grad_norm_ = updater_->Apply();
  // Trainable fixed heads (SAF App. C.3.2) moved: refresh their buffers (log Z too) so
  // checkpoints, evaluation and methods see the current patterns. A no-op without them.
  for (int64_t l = 0; l < c_.model.layers; ++l) model_->attention(l)->SyncTrainableFixed();
  ++progress_.step;
  ctx.step = progress_.step;
  if (progress_.step == first_step_ + 1) {
    timer_->Mark(progress_.step);  // the first update is warm-up: timing starts after it
    if (lead_) {
      Json first = AttentionPlanProvenance(model_);
      if (reducer_) first["allreduce_buckets"] = int64_t(reducer_->bucket_count());
      events_->Provenance(first);
    }
  }
  if (replans_now_) EndReplanningUpdate();
  double update_s = SecondsSince(u0);
  if (group_) {  // an update takes as long as its slowest rank
    torch::Tensor u = torch::full({1}, update_s, torch::dtype(torch::kDouble).device(device_));
    group_->AllReduceMax(u);
    update_s = u.item<double>();
    slowest_rank_s_ += update_s;
  }
  slowest_update_s_ = std::max(slowest_update_s_, update_s);
  if (!req_.hooks.empty()) {
    const double update_loss = loss_.item<double>();
    StatusOr<bool> intervened = TimeHooks([&] {
      HEADLAB_RETURN_IF_ERROR(
          ForEachHook(req_.hooks, [&](TrainHooks& h) { return h.AfterUpdate(ctx, update_loss); }));
      return SyncReplicas("the methods' AfterUpdate");
    });
    if (!intervened.ok()) return intervened.status();
    replan_next_ = replan_next_ || *intervened;
  }

  *last = !timed_ && progress_.step == t_.steps;
  if (*last || (t_.log_every > 0 && progress_.step % t_.log_every == 0)) LogStep();
  if (*last) {
    // The latest paths are the run's: a method may have re-planned layers without an
    // intervention (AAH's windows change at every control update).
    if (lead_) events_->Provenance(AttentionPlanProvenance(model_));
    return Status::Ok();  // the final evaluation and checkpoint follow
  }
  if (t_.eval_every > 0 && progress_.step % t_.eval_every == 0) HEADLAB_RETURN_IF_ERROR(Evaluate());
  if (t_.checkpoint_every > 0 && progress_.step % t_.checkpoint_every == 0)
    HEADLAB_RETURN_IF_ERROR(Save());
  return Status::Ok();
}

Status Trainer::Finish() {
  timer_->Pause(progress_.step);
  // Final reporting: evaluation with per-token log-probs, and the final checkpoint (not
  // again when nothing was trained after resuming).
  if (loss_.defined() && logged_at_ != progress_.step) LogStep();
  ctx_->step = progress_.step;
  // With methods, AfterTraining may change the model (SAF at tau = 1, AoH conversion):
  // the final evaluation and checkpoint are then of the changed model.
  const bool has_methods = !req_.hooks.empty();
  HEADLAB_RETURN_IF_ERROR(
      ForEachHook(req_.hooks, [&](TrainHooks& h) { return h.AfterTraining(*ctx_); }));
  if (evaluated_at_ != progress_.step || has_methods) HEADLAB_RETURN_IF_ERROR(Evaluate());
  if (!lead_) return Status::Ok();  // rank 0 reports the run
  if (dp_.peers) dp_.peers->Wait();
  HEADLAB_RETURN_IF_ERROR(SaveLogProbs(req_.out_dir, progress_.step, logprobs_, events_));
  if ((saved_at_ != progress_.step && !(*from_ && progress_.step == first_step_)) || has_methods)
    HEADLAB_RETURN_IF_ERROR(Save());

  const double elapsed = SecondsSince(t0_);
  Json values = {{metric::kEvalLoss, eval_loss_},
                 {metric::kEvalPpl, std::exp(eval_loss_)},
                 {metric::kTrainTokens, double(progress_.step * tokens_per_step_)},
                 {metric::kElapsedS, elapsed},
                 {metric::kPeakMemBytes, double(PeakRssBytes())}};
  MetricRow rates;
  AddThroughput(&rates);
  AddDistMetrics(&rates);
  for (const auto& [key, value] : rates) values[key] = value;
  if (!std::isnan(last_loss_)) values[metric::kTrainLoss] = last_loss_;
  if (group_) values[metric::kDistRanks] = world_;
  HEADLAB_RETURN_IF_ERROR(
      ForEachHook(req_.hooks, [&](TrainHooks& h) { return h.Summarize(*ctx_, &values); }));
  events_->Summary(values);
  return Status::Ok();
}

}  // namespace

Status RunTraining(const TrainRequest& req, EventSink* events) {
  Trainer trainer(req, events);
  HEADLAB_RETURN_IF_ERROR(trainer.SetUp());
  HEADLAB_RETURN_IF_ERROR(trainer.Restore());
  HEADLAB_RETURN_IF_ERROR(trainer.StartMethods());
  for (bool last = false; !last && trainer.KeepGoing();)
    HEADLAB_RETURN_IF_ERROR(trainer.Step(&last));
  return trainer.Finish();
}

}  // namespace headlab
