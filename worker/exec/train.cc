// The training loop of run kind "train".
#include "worker/exec/train.h"

#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include <c10/core/DeviceGuard.h>
#include <torch/torch.h>
#include <torch/version.h>

#include "common/files.h"
#include "common/log.h"
#include "common/metric_names.h"
#include "common/sha256.h"
#include "worker/exec/attention_cuda.h"
#include "worker/exec/bench_clock.h"
#include "worker/exec/checkpoint.h"
#include "worker/exec/data.h"
#include "worker/exec/data_check.h"
#include "worker/exec/dist.h"
#include "worker/exec/grad_reducer.h"
#include "worker/exec/import_weights.h"
#include "worker/exec/model.h"
#include "worker/exec/optimizer.h"
#include "worker/exec/replica_sync.h"
#include "worker/exec/run_setup.h"
#include "worker/exec/stop_flag.h"
#include "worker/exec/throughput.h"
#include "worker/exec/train_hooks.h"
#include "worker/exec/update_step.h"
#include "worker/exec/update_timer.h"

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

StatusOr<Dataset> LoadData(const ExecConfig& c) {
  StatusOr<Dataset> d = LoadDataSource(c.data.source, c.data.path, c.data.val_fraction, c.model.vocab);
  if (!d.ok()) return d;
  HEADLAB_RETURN_IF_ERROR(CheckDataFitsModel(d.value(), c));
  if (c.data.calib_fraction > 0)
    HEADLAB_RETURN_IF_ERROR(HoldOutCalibration(&d.value(), c.data.calib_fraction, c.model.context));
  if (d->vocab > c.model.vocab)
    return Status::InvalidArgument("config: $.config.model.vocab: the " + c.data.source +
                                   " data set needs vocab >= " + std::to_string(d->vocab) +
                                   ", got " + std::to_string(c.model.vocab));
  for (const TokenSpan* split : {&d->train, &d->val})
    if (split->size <= c.model.context)
      return Status::InvalidArgument(
          "config: $.config.model.context: " + std::to_string(c.model.context) +
          " needs splits of more than that many tokens; " + d->path + " has " +
          std::to_string(d->train.size) + " train and " + std::to_string(d->val.size) +
          " held-out tokens");
  return d;
}

// [B, T+1] row-major tokens -> inputs and next-token targets on `device`. To a GPU through
// pinned memory without waiting (the caching host allocator keeps the pinned copy alive
// until the transfer is done, so `tokens` may go at once).
std::pair<torch::Tensor, torch::Tensor> ToBatch(std::vector<int64_t>& tokens, int64_t batch,
                                                int64_t context, torch::Device device) {
  torch::Tensor host = torch::from_blob(tokens.data(), {batch, context + 1}, torch::kLong);
  torch::Tensor t = device.is_cuda() ? host.pin_memory().to(device, /*non_blocking=*/true)
                                     : host.to(device, /*non_blocking=*/false, /*copy=*/true);
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

// Held-out loss of the first `batches` fixed evaluation batches, in eval mode; like
// EvalLogProbs, a batch holds the global batch's rows (the same on every rank).
double HeldOutLoss(Gpt& model, const Dataset& data, const ExecConfig& c, torch::Device device,
                   int64_t batches) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  double sum = 0;
  int64_t count = 0;
  const int64_t rows = c.train.batch_size * c.train.ranks;
  for (int64_t b = 0; b < batches; ++b) {
    std::vector<int64_t> tokens;
    EvalBatch(data.val, c.model.context, rows, b, c.train.eval_batches, &tokens);
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

// Writes the checkpoint of `progress.step` atomically and reports it as an artifact.
Status SaveCheckpoint(const TrainRequest& req, Gpt& model, torch::optim::Optimizer& opt,
                      const TrainProgress& progress, EventSink* events) {
  std::string bytes = SerializeCheckpoint(model, opt, progress, CanonicalJson(req.config_json));
  std::string path = CheckpointPath(req.out_dir, progress.step);
  HEADLAB_RETURN_IF_ERROR(WriteFileAtomic(path, bytes));
  events->Artifact("checkpoint", path, Sha256Hex(bytes), bytes.size(), progress.step);
  return Status::Ok();
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

Status RunTraining(const TrainRequest& req, EventSink* events) {
  const Clock::time_point t0 = Clock::now();
  const ExecConfig& c = req.config;
  const TrainConfig& t = c.train;
  if (t.threads > 0) torch::set_num_threads(int(t.threads));
  const int world = int(t.ranks), rank = req.rank;
  const bool lead = rank == 0;  // reports events, evaluates, writes checkpoints
  torch::Device device(torch::kCPU);
  HEADLAB_RETURN_IF_ERROR(PickRankDevice(t.device, rank, &device));
  c10::DeviceGuard device_guard(device);  // rank r's GPU is the current device
  StatusOr<Dataset> data = LoadData(c);
  if (!data.ok()) return data.status();
  HEADLAB_RETURN_IF_ERROR(MakeDirs(req.out_dir));
  StatusOr<ReduceDtype> reduce_dtype = ParseReduceDtype(t.allreduce_dtype);
  if (!reduce_dtype.ok()) return reduce_dtype.status();

  // Data parallel (dist.h): rank 0 launches its peers; every rank joins the group.
  StatusOr<DataParallel> dp = StartDataParallel(rank, world, req.out_dir, req.manifest_path, device);
  if (!dp.ok()) return dp.status();
  ProcessGroup* group = dp->group.get();

  torch::manual_seed(uint64_t(c.seed));  // model init; data order has its own generator
  Gpt model(c.model);
  Json init_prov = Json::object();  // model.init_from: the imported checkpoint
  HEADLAB_RETURN_IF_ERROR(InitFromCheckpoint(*model, c.model, &init_prov));
  model->to(device);
  HEADLAB_RETURN_IF_ERROR(ConfigureExecution(model, t, device));
  std::unique_ptr<torch::optim::AdamW> opt = MakeOptimizer(model, t);
  Updater updater(model, *opt, t, model->precision(), device);
  std::unique_ptr<GradientReducer> reducer;
  std::unique_ptr<ReplicaSync> replicas;  // with methods
  if (group) {
    reducer = std::make_unique<GradientReducer>(*group, *reduce_dtype);
    updater.ReduceGradientsWith(reducer.get());
    if (!req.hooks.empty()) replicas = std::make_unique<ReplicaSync>(*group);
  }
  BatchSampler sampler(uint64_t(c.seed), c.model.context);
  TrainProgress progress;

  Json prov = {{"libtorch_version", TORCH_VERSION},
               {"device", device.str()},
               {"threads", torch::get_num_threads()},
               {"dataset_source", c.data.source},
               {"dataset_path", data->path},
               {"dataset_sha256", data->sha256},
               {"dataset_train_tokens", data->train.size},
               {"dataset_val_tokens", data->val.size},
               {"dataset_calib_tokens", data->calib.size},
               {"ranks", world}};
  prov.update(ExecutionProvenance(model, device));
  if (group) {
    prov["dist_backend"] = group->backend();
    prov["allreduce_dtype"] = ReduceDtypeName(*reduce_dtype);
    prov["allreduce_bucket_bytes"] = kGradientBucketBytes;
  }
  prov.update(init_prov);
  prov.update(DatasetProvenance(data.value(), c.data.source));
  // A continuation starts from its shared parent's checkpoint (the shared-parent
  // form in which every paired comparison is made; schema/grid.md) unless it already has a checkpoint of its own (a requeue).
  const std::optional<ResumePoint>& from = req.resume ? req.resume : req.parent;
  if (from) {
    StatusOr<std::string> bytes = ReadFile(from->path);
    if (!bytes.ok()) return bytes.status();
    std::string sha = Sha256Hex(bytes.value());
    if (sha != from->sha256)
      return Status::Corruption(from->path + ": SHA-256 is " + sha + ", the manifest expects " +
                                from->sha256);
    HEADLAB_RETURN_IF_ERROR(RestoreCheckpoint(bytes.value(), from->path, model, *opt, &progress));
    if (progress.step != from->step)
      return Status::Corruption(from->path + ": holds step " + std::to_string(progress.step) +
                                ", the manifest expects " + std::to_string(from->step));
    HEADLAB_RETURN_IF_ERROR(sampler.LoadState(progress.sampler_state));
    if (progress.loss_scale > 0) updater.scaler().Restore(progress.loss_scale, progress.loss_scale_growth);
    // A continuation may change the optimisation settings (e.g. another arm's weight
    // decay): the config, not the checkpoint, decides them.
    auto& groups = opt->param_groups();
    for (size_t i = 0; i < groups.size(); ++i)
      static_cast<torch::optim::AdamWOptions&>(groups[i].options())
          .betas({t.beta1, t.beta2})
          .weight_decay(i == 0 ? t.weight_decay : 0.0);
    // The checkpoint restored the parent's head states; a continuation arm's own
    // model.head_modes (e.g. the heads it prunes) apply on top. A resume keeps its own.
    if (!req.resume)
      for (const HeadAssignment& a : c.model.head_modes)
        model->attention(a.layer)->SetHeadState(a.head, a.state);
    prov["resumed_from_step"] = progress.step;
    LogInfo(std::string(req.resume ? "resumed" : "continuing from parent") + " from " +
            from->path + " at step " + std::to_string(progress.step));
  }
  if (req.parent) {
    prov["parent_run"] = req.parent_run;
    prov["parent_checkpoint_sha256"] = req.parent->sha256;
    prov["parent_checkpoint_path"] = req.parent->path;
    prov["parent_step"] = req.parent->step;
  } else if (req.resume) {
    prov["parent_checkpoint_sha256"] = req.resume->sha256;
    prov["parent_checkpoint_path"] = req.resume->path;
  }
  // Methods see a data-parallel run as one process with the global batch (train_hooks.h):
  // the global micro-batch size, and on ranks > 0 a folder of their own for the artifacts
  // nobody reports (rank 0 alone reports).
  ExecConfig method_config = c;
  method_config.train.batch_size = t.batch_size * world;
  const std::string method_dir = lead ? req.out_dir : req.out_dir + "/rank-" + std::to_string(rank);
  if (!lead && !req.hooks.empty()) HEADLAB_RETURN_IF_ERROR(MakeDirs(method_dir));
  TrainContext ctx{method_config, req.config_json, method_dir, model, opt, data.value(), device,
                   events,        progress.step,   [&](int64_t batches) {
                     return HeldOutLoss(model, *data, c, device, batches);
                   }};
  // A method's own state comes back only on a resume of the same run: a continuation
  // from a parent starts its methods afresh.
  for (const std::shared_ptr<TrainHooks>& h : req.hooks) {
    std::optional<std::string> saved;
    auto it = progress.method_states.find(h->name());
    if (req.resume && it != progress.method_states.end()) saved = it->second;
    HEADLAB_RETURN_IF_ERROR(h->OnStart(ctx, saved, &prov));
  }
  // Every rank's methods must have made the same choices (replica_sync.h).
  auto sync_replicas = [&](const char* where) {
    return replicas ? replicas->Sync(model, updater.InGradientOrder(), where, progress.step)
                    : Status::Ok();
  };
  HEADLAB_RETURN_IF_ERROR(sync_replicas("the methods' OnStart"));
  events->Provenance(prov);
  LogInfo("train: " + std::to_string(c.model.layers) + " layers, " + std::to_string(c.model.heads) +
          " heads, width " + std::to_string(c.model.width) + ", context " +
          std::to_string(c.model.context) + ", " + std::to_string(t.steps) + " steps on " +
          device.str() + " (" + std::to_string(torch::get_num_threads()) + " threads)");

  const int64_t tokens_per_step = t.batch_size * t.grad_accum * c.model.context * world;
  const int64_t first_step = progress.step;
  const Clock::time_point train_t0 = Clock::now();
  const bool timed = t.time_budget_s > 0;
  double eval_loss = std::nan("");
  double last_loss = std::nan("");
  int64_t logged_at = -1, evaluated_at = -1, saved_at = -1;
  std::vector<float> logprobs;  // of the latest evaluation
  // Throughput (throughput.h): steady-state windows of updates; until the first window
  // closes (short runs), the attempt's updates over its wall time since the loop began.
  UpdateTimer timer(device);
  const double flops_per_token = ModelFlopsPerToken(c.model);
  const double peak_flops = PeakFlops(DeviceLabel(device), PrecisionName(model->precision()));
  auto tokens_per_s = [&]() {
    if (timer.updates() > 0) return double(timer.updates() * tokens_per_step) / timer.seconds();
    double s = SecondsSince(train_t0);
    return s > 0 ? double((progress.step - first_step) * tokens_per_step) / s : 0.0;
  };
  auto mfu = [&]() { return peak_flops > 0 ? flops_per_token * tokens_per_s() / peak_flops : 0.0; };
  auto throughput = [&](MetricRow* row) {
    row->emplace_back(metric::kTrainTokensPerS, tokens_per_s());
    if (timer.updates() > 0) row->emplace_back(metric::kTrainStepS, timer.SecondsPerUpdate());
    if (mfu() > 0) row->emplace_back(metric::kTrainMfu, mfu());
    if (device.is_cuda()) row->emplace_back(metric::kGpuPeakMemBytes, double(DevicePeakMemoryBytes(device)));
  };
  auto evaluate = [&]() -> Status {
    if (!lead) return Status::Ok();
    timer.Pause(progress.step);
    logprobs = EvalLogProbs(model, *data, c, device);
    eval_loss = MeanNats(logprobs);
    evaluated_at = progress.step;
    events->Metric(progress.step, metric::kEvalLoss, eval_loss);
    events->Metric(progress.step, metric::kEvalPpl, std::exp(eval_loss));
    LogInfo("step " + std::to_string(progress.step) + ": eval loss " + std::to_string(eval_loss) +
            " ppl " + std::to_string(std::exp(eval_loss)));
    Status st = ForEachHook(req.hooks, [&](TrainHooks& h) { return h.AfterEvaluate(ctx); });
    timer.Pause(progress.step);  // the hooks may have queued work too
    timer.Resume(progress.step);
    return st;
  };
  auto save = [&]() {
    if (!lead) return Status::Ok();
    timer.Pause(progress.step);
    progress.sampler_state = sampler.SaveState();
    if (updater.scaler().enabled()) {
      progress.loss_scale = updater.scaler().scale();
      progress.loss_scale_growth = updater.scaler().growth_tracker();
    }
    progress.method_states.clear();
    for (const std::shared_ptr<TrainHooks>& h : req.hooks) {
      std::string state = h->SaveState(ctx);
      if (!state.empty()) progress.method_states[h->name()] = std::move(state);
    }
    saved_at = progress.step;
    Status st = SaveCheckpoint(req, model, *opt, progress, events);
    timer.Resume(progress.step);
    return st;
  };
  torch::Tensor loss, grad_norm;  // of the latest update, on the device
  double lr = 0;
  double slowest_rank_s = 0;  // total over this attempt's updates
  // Per update of this attempt: the communication the update waited for after its last
  // backward (the all-reduce time not hidden behind backward) and the slowest rank's time.
  auto dist_metrics = [&](MetricRow* row) {
    if (!group) return;
    const double updates = double(std::max<int64_t>(1, progress.step - first_step));
    row->emplace_back(metric::kDistAllReduceS, reducer->exposed_seconds() / updates);
    row->emplace_back(metric::kDistSlowestUpdateS, slowest_rank_s / updates);
  };
  auto log_step = [&]() {
    last_loss = loss.item<double>();
    timer.Mark(progress.step);
    if (!lead) return;
    logged_at = progress.step;
    const double norm = grad_norm.item<double>();
    MetricRow row = {{metric::kTrainLoss, last_loss},
                     {metric::kTrainLr, lr},
                     {metric::kTrainGradNorm, norm},
                     {metric::kTrainTokens, double(progress.step * tokens_per_step)},
                     {metric::kElapsedS, SecondsSince(t0)}};
    throughput(&row);
    dist_metrics(&row);
    for (const std::shared_ptr<TrainHooks>& h : req.hooks) h->LogRow(ctx, &row);
    for (const auto& [key, value] : row) events->Metric(progress.step, key, value);
    char line[200];
    std::snprintf(line, sizeof line, "step %lld/%lld loss %.4f lr %.2e grad %.3f %.0f tok/s MFU %.3f",
                  static_cast<long long>(progress.step), static_cast<long long>(t.steps),
                  last_loss, lr, norm, tokens_per_s(), mfu());
    LogInfo(line);
  };

  // Matched time (SAF App. C.3.3): the allowance runs from the start of this attempt
  // (loading included) and the run stops before an update would exceed it, predicting an
  // update's cost by the slowest one so far. The schedule then advances with elapsed time
  // over what is left of the `steps`-long schedule, the same for every arm.
  double slowest_update_s = 0;
  // Every rank must take the same number of updates: under a time budget any rank's
  // "stop" stops them all (one max-reduction per update).
  auto keep_going = [&]() {
    bool go = timed ? SecondsSince(t0) + slowest_update_s <= t.time_budget_s : progress.step < t.steps;
    if (group && timed) {
      torch::Tensor stop = torch::full({1}, go ? 0.0f : 1.0f, torch::dtype(torch::kFloat).device(device));
      group->AllReduceMax(stop);
      go = stop.item<float>() == 0.0f;
    }
    return go;
  };
  while (keep_going()) {
    if (StopRequested()) return Status::Cancelled("stopped by signal at step " + std::to_string(progress.step));
    const Clock::time_point u0 = Clock::now();
    const double at = timed ? double(first_step) + std::min(1.0, SecondsSince(t0) / t.time_budget_s) *
                                                       double(std::max<int64_t>(0, t.steps - first_step))
                            : double(progress.step);
    lr = ScheduledLr(t, at);
    SetLr(*opt, lr);
    // Gradient accumulation: the update's loss is the mean over grad_accum micro-batches
    // (each scaled by 1/grad_accum before backward), drawn one after another from the
    // sampler, so it equals one batch of batch_size * grad_accum sequences up to rounding.
    ctx.step = progress.step;
    torch::Tensor total;
    for (int64_t micro = 0; micro < t.grad_accum; ++micro) {
      // Every rank draws the same global batch of world * batch_size rows and trains on
      // its own slice, so the data order does not depend on the number of ranks.
      std::vector<int64_t> tokens;
      sampler.Next(data->train, t.batch_size * world, &tokens);
      if (micro == 0) {
        // The methods see the whole global micro-batch on every rank; they may change the
        // model and the optimiser's tensors, so the update begins after them.
        if (!req.hooks.empty()) {
          torch::Tensor gx = ToBatch(tokens, t.batch_size * world, c.model.context, device).first;
          HEADLAB_RETURN_IF_ERROR(
              ForEachHook(req.hooks, [&](TrainHooks& h) { return h.BeforeUpdate(ctx, gx); }));
          HEADLAB_RETURN_IF_ERROR(sync_replicas("the methods' BeforeUpdate"));
        }
        updater.Begin();
      }
      if (world > 1) {
        const size_t row = size_t(c.model.context + 1) * size_t(t.batch_size);
        tokens = std::vector<int64_t>(tokens.begin() + long(size_t(rank) * row),
                                      tokens.begin() + long(size_t(rank + 1) * row));
      }
      auto [x, y] = ToBatch(tokens, t.batch_size, c.model.context, device);
      torch::Tensor part = updater.Accumulate(x, y);
      total = micro == 0 ? part : total + part;
    }
    loss = total;
    // Data parallel: the mean gradient over every rank's rows of everything the optimiser
    // updates (SAF App. C.5: communication is part of the update time), its buckets
    // all-reduced while the last backward ran; the methods read it afterwards.
    updater.FinishGradients();
    HEADLAB_RETURN_IF_ERROR(ForEachHook(req.hooks, [&](TrainHooks& h) { return h.AfterBackward(ctx); }));
    if (group) {  // the mean loss
      group->AllReduceSum(loss);
      loss.div_(double(world));
    }
    grad_norm = updater.Apply();
    // Trainable fixed heads (SAF App. C.3.2) moved: refresh their buffers (log Z too) so
    // checkpoints, evaluation and methods see the current patterns. A no-op without them.
    for (int64_t l = 0; l < c.model.layers; ++l) model->attention(l)->SyncTrainableFixed();
    ++progress.step;
    ctx.step = progress.step;
    if (progress.step == first_step + 1) {
      timer.Mark(progress.step);  // the first update is warm-up: timing starts after it
      if (lead) {
        Json first = {{"attention_paths", AttentionPaths(model)},
                      {"attention_choices", AttentionChoices(model)}};
        if (reducer) first["allreduce_buckets"] = int64_t(reducer->bucket_count());
        events->Provenance(first);
      }
    }
    double update_s = SecondsSince(u0);
    if (group) {  // an update takes as long as its slowest rank
      torch::Tensor u = torch::full({1}, update_s, torch::dtype(torch::kDouble).device(device));
      group->AllReduceMax(u);
      update_s = u.item<double>();
      slowest_rank_s += update_s;
    }
    slowest_update_s = std::max(slowest_update_s, update_s);
    if (!req.hooks.empty()) {
      const double update_loss = loss.item<double>();
      HEADLAB_RETURN_IF_ERROR(
          ForEachHook(req.hooks, [&](TrainHooks& h) { return h.AfterUpdate(ctx, update_loss); }));
      HEADLAB_RETURN_IF_ERROR(sync_replicas("the methods' AfterUpdate"));
    }

    const bool last = !timed && progress.step == t.steps;
    if (last || (t.log_every > 0 && progress.step % t.log_every == 0)) log_step();
    if (last) break;  // the final evaluation and checkpoint follow
    if (t.eval_every > 0 && progress.step % t.eval_every == 0) HEADLAB_RETURN_IF_ERROR(evaluate());
    if (t.checkpoint_every > 0 && progress.step % t.checkpoint_every == 0)
      HEADLAB_RETURN_IF_ERROR(save());
  }
  timer.Pause(progress.step);
  // Final reporting: evaluation with per-token log-probs, and the final checkpoint (not
  // again when nothing was trained after resuming).
  if (loss.defined() && logged_at != progress.step) log_step();
  ctx.step = progress.step;
  // With methods, AfterTraining may change the model (SAF at tau = 1, AoH conversion):
  // the final evaluation and checkpoint are then of the changed model.
  const bool has_methods = !req.hooks.empty();
  HEADLAB_RETURN_IF_ERROR(ForEachHook(req.hooks, [&](TrainHooks& h) { return h.AfterTraining(ctx); }));
  if (evaluated_at != progress.step || has_methods) HEADLAB_RETURN_IF_ERROR(evaluate());
  if (!lead) return Status::Ok();  // rank 0 reports the run
  if (dp->peers) dp->peers->Wait();
  HEADLAB_RETURN_IF_ERROR(SaveLogProbs(req.out_dir, progress.step, logprobs, events));
  if ((saved_at != progress.step && !(from && progress.step == first_step)) || has_methods)
    HEADLAB_RETURN_IF_ERROR(save());

  const double elapsed = SecondsSince(t0);
  Json values = {{metric::kEvalLoss, eval_loss},
                 {metric::kEvalPpl, std::exp(eval_loss)},
                 {metric::kTrainTokens, double(progress.step * tokens_per_step)},
                 {metric::kElapsedS, elapsed},
                 {metric::kPeakMemBytes, double(PeakRssBytes())}};
  MetricRow rates;
  throughput(&rates);
  dist_metrics(&rates);
  for (const auto& [key, value] : rates) values[key] = value;
  if (!std::isnan(last_loss)) values[metric::kTrainLoss] = last_loss;
  if (group) values[metric::kDistRanks] = world;
  HEADLAB_RETURN_IF_ERROR(ForEachHook(req.hooks, [&](TrainHooks& h) { return h.Summarize(ctx, &values); }));
  events->Summary(values);
  return Status::Ok();
}

}  // namespace headlab
