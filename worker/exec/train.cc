// The training loop of run kind "train".
#include "worker/exec/train.h"

#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include <torch/torch.h>
#include <torch/version.h>

#include "common/files.h"
#include "common/log.h"
#include "common/metric_names.h"
#include "common/sha256.h"
#include "worker/exec/checkpoint.h"
#include "worker/exec/data.h"
#include "worker/exec/model.h"
#include "worker/exec/stop_flag.h"

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
  StatusOr<Dataset> d = c.data.source == "shards"
                            ? LoadShards(c.data.path, c.model.vocab)
                            : LoadBuiltinCorpus(c.data.val_fraction);
  if (!d.ok()) return d;
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

// Resolves train.device (auto = cuda when available) into *device.
Status PickDevice(const std::string& want, torch::Device* device) {
  bool cuda = torch::cuda::is_available();
  if (want == "cuda" && !cuda)
    return Status::Unavailable("train.device is \"cuda\" but no CUDA device is available");
  *device = (want == "cpu" || !cuda) ? torch::Device(torch::kCPU) : torch::Device(torch::kCUDA, 0);
  return Status::Ok();
}

// [B, T+1] row-major tokens -> inputs and next-token targets on `device`.
std::pair<torch::Tensor, torch::Tensor> ToBatch(std::vector<int64_t>& tokens, int64_t batch,
                                                int64_t context, torch::Device device) {
  torch::Tensor t = torch::from_blob(tokens.data(), {batch, context + 1}, torch::kLong)
                        .to(device, /*non_blocking=*/false, /*copy=*/true);
  return {t.narrow(1, 0, context), t.narrow(1, 1, context)};
}

// Mean nats/token over the fixed evaluation batches of the held-out split.
double Evaluate(Gpt& model, const Dataset& data, const ExecConfig& c, torch::Device device) {
  torch::NoGradGuard no_grad;
  double total = 0;
  for (int64_t b = 0; b < c.train.eval_batches; ++b) {
    std::vector<int64_t> tokens;
    EvalBatch(data.val, c.model.context, c.train.batch_size, b, c.train.eval_batches, &tokens);
    auto [x, y] = ToBatch(tokens, c.train.batch_size, c.model.context, device);
    total += model->Loss(x, y).item<double>();
  }
  return total / double(c.train.eval_batches);  // equal-size batches: mean of means
}

// AdamW with weight decay on matrices (dim >= 2: embeddings, projections) only; vectors
// (LayerNorm gains and biases) are not decayed.
std::unique_ptr<torch::optim::AdamW> MakeOptimizer(Gpt& model, const TrainConfig& t) {
  std::vector<torch::Tensor> decay, no_decay;
  for (const torch::Tensor& p : model->parameters()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  auto opts = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(t.lr).betas({t.beta1, t.beta2}).eps(1e-8).weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, opts(t.weight_decay));
  groups.emplace_back(no_decay, opts(0.0));
  return std::make_unique<torch::optim::AdamW>(groups, torch::optim::AdamWOptions(t.lr));
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

double ScheduledLr(const TrainConfig& t, int64_t step) {
  if (step < t.warmup_steps) return t.lr * double(step + 1) / double(t.warmup_steps);
  const double min_lr = t.lr * t.min_lr_ratio;
  const int64_t decay_steps = std::max<int64_t>(1, t.steps - t.warmup_steps - 1);
  const double progress = std::min(1.0, double(step - t.warmup_steps) / double(decay_steps));
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
  torch::Device device(torch::kCPU);
  HEADLAB_RETURN_IF_ERROR(PickDevice(t.device, &device));
  StatusOr<Dataset> data = LoadData(c);
  if (!data.ok()) return data.status();
  HEADLAB_RETURN_IF_ERROR(MakeDirs(req.out_dir));

  torch::manual_seed(uint64_t(c.seed));  // model init; data order has its own generator
  Gpt model(c.model);
  model->to(device);
  std::unique_ptr<torch::optim::AdamW> opt = MakeOptimizer(model, t);
  BatchSampler sampler(uint64_t(c.seed), c.model.context);
  TrainProgress progress;

  Json prov = {{"libtorch_version", TORCH_VERSION},
               {"device", device.str()},
               {"threads", torch::get_num_threads()},
               {"dataset_source", c.data.source},
               {"dataset_path", data->path},
               {"dataset_sha256", data->sha256},
               {"dataset_train_tokens", data->train.size},
               {"dataset_val_tokens", data->val.size}};
  if (req.resume) {
    StatusOr<std::string> bytes = ReadFile(req.resume->path);
    if (!bytes.ok()) return bytes.status();
    std::string sha = Sha256Hex(bytes.value());
    if (sha != req.resume->sha256)
      return Status::Corruption(req.resume->path + ": SHA-256 is " + sha + ", the manifest expects " +
                                req.resume->sha256);
    HEADLAB_RETURN_IF_ERROR(
        RestoreCheckpoint(bytes.value(), req.resume->path, model, *opt, &progress));
    if (progress.step != req.resume->step)
      return Status::Corruption(req.resume->path + ": holds step " + std::to_string(progress.step) +
                                ", the manifest expects " + std::to_string(req.resume->step));
    HEADLAB_RETURN_IF_ERROR(sampler.LoadState(progress.sampler_state));
    // A continuation may change the optimisation settings (e.g. another arm's weight
    // decay): the config, not the checkpoint, decides them.
    auto& groups = opt->param_groups();
    for (size_t i = 0; i < groups.size(); ++i)
      static_cast<torch::optim::AdamWOptions&>(groups[i].options())
          .betas({t.beta1, t.beta2})
          .weight_decay(i == 0 ? t.weight_decay : 0.0);
    prov["parent_checkpoint_sha256"] = req.resume->sha256;
    prov["parent_checkpoint_path"] = req.resume->path;
    prov["resumed_from_step"] = progress.step;
    LogInfo("resumed from " + req.resume->path + " at step " + std::to_string(progress.step));
  }
  events->Provenance(prov);
  LogInfo("train: " + std::to_string(c.model.layers) + " layers, " + std::to_string(c.model.heads) +
          " heads, width " + std::to_string(c.model.width) + ", context " +
          std::to_string(c.model.context) + ", " + std::to_string(t.steps) + " steps on " +
          device.str() + " (" + std::to_string(torch::get_num_threads()) + " threads)");

  const int64_t tokens_per_step = t.batch_size * c.model.context;
  const int64_t first_step = progress.step;
  const Clock::time_point train_t0 = Clock::now();
  double last_loss = std::nan("");
  double eval_loss = std::nan("");
  auto tokens_per_s = [&]() {
    double s = SecondsSince(train_t0);
    return s > 0 ? double((progress.step - first_step) * tokens_per_step) / s : 0.0;
  };
  auto evaluate = [&]() {
    eval_loss = Evaluate(model, *data, c, device);
    events->Metric(progress.step, metric::kEvalLoss, eval_loss);
    events->Metric(progress.step, metric::kEvalPpl, std::exp(eval_loss));
    LogInfo("step " + std::to_string(progress.step) + ": eval loss " + std::to_string(eval_loss) +
            " ppl " + std::to_string(std::exp(eval_loss)));
  };

  while (progress.step < t.steps) {
    if (StopRequested()) return Status::Cancelled("stopped by signal at step " + std::to_string(progress.step));
    const double lr = ScheduledLr(t, progress.step);
    SetLr(*opt, lr);
    std::vector<int64_t> tokens;
    sampler.Next(data->train, t.batch_size, &tokens);
    auto [x, y] = ToBatch(tokens, t.batch_size, c.model.context, device);
    opt->zero_grad();
    torch::Tensor loss = model->Loss(x, y);
    loss.backward();
    // clip_grad_norm_ with an infinite limit only measures the norm.
    double grad_norm = torch::nn::utils::clip_grad_norm_(
        model->parameters(), t.grad_clip > 0 ? t.grad_clip : INFINITY);
    opt->step();
    ++progress.step;

    const bool last = progress.step == t.steps;
    if (last || (t.log_every > 0 && progress.step % t.log_every == 0)) {
      last_loss = loss.item<double>();
      const int64_t tokens_seen = progress.step * tokens_per_step;
      events->Metric(progress.step, metric::kTrainLoss, last_loss);
      events->Metric(progress.step, metric::kTrainLr, lr);
      events->Metric(progress.step, metric::kTrainGradNorm, grad_norm);
      events->Metric(progress.step, metric::kTrainTokens, double(tokens_seen));
      events->Metric(progress.step, metric::kTrainTokensPerS, tokens_per_s());
      events->Metric(progress.step, metric::kElapsedS, SecondsSince(t0));
      char line[160];
      std::snprintf(line, sizeof line, "step %lld/%lld loss %.4f lr %.2e grad %.3f %.0f tok/s",
                    static_cast<long long>(progress.step), static_cast<long long>(t.steps),
                    last_loss, lr, grad_norm, tokens_per_s());
      LogInfo(line);
    }
    if (last || (t.eval_every > 0 && progress.step % t.eval_every == 0)) evaluate();
    if (last || (t.checkpoint_every > 0 && progress.step % t.checkpoint_every == 0)) {
      progress.sampler_state = sampler.SaveState();
      HEADLAB_RETURN_IF_ERROR(SaveCheckpoint(req, model, *opt, progress, events));
    }
  }
  if (std::isnan(eval_loss)) {  // nothing left to train (steps 0, or resumed at the end)
    evaluate();
    if (first_step == t.steps && !req.resume) {
      progress.sampler_state = sampler.SaveState();
      HEADLAB_RETURN_IF_ERROR(SaveCheckpoint(req, model, *opt, progress, events));
    }
  }

  const double elapsed = SecondsSince(t0);
  Json values = {{metric::kEvalLoss, eval_loss},
                 {metric::kEvalPpl, std::exp(eval_loss)},
                 {metric::kTrainTokens, double(progress.step * tokens_per_step)},
                 {metric::kElapsedS, elapsed},
                 {metric::kTrainTokensPerS, tokens_per_s()},
                 {metric::kPeakMemBytes, double(PeakRssBytes())}};
  if (!std::isnan(last_loss)) values[metric::kTrainLoss] = last_loss;
  events->Summary(values);
  return Status::Ok();
}

}  // namespace headlab
