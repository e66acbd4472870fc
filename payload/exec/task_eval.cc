// The synthetic task run kinds: MQAR training/evaluation and passkey evaluation.
#include "payload/exec/task_eval.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <sstream>
#include <tuple>

#include <torch/torch.h>

#include "common/config_key.h"
#include "common/files.h"
#include "common/log.h"
#include "common/metric_names.h"
#include "common/sha256.h"
#include "payload/exec/checkpoint.h"
#include "payload/exec/data.h"
#include "payload/exec/model.h"
#include "payload/exec/optimizer.h"
#include "payload/exec/passkey_prompts.h"
#include "payload/exec/run_setup.h"
#include "payload/exec/stop_flag.h"
#include "payload/exec/tasks.h"
#include "payload/exec/update_step.h"

namespace headlab {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string ConfigError(const std::string& path, const std::string& what) {
  return "config: $.config." + path + ": " + what;
}

// Restores the run's own checkpoint (a resume) or its parent's into model and optimiser,
// checking the manifest's SHA-256 and step; adds the provenance fields.
Status RestoreStart(const TrainRequest& req, Gpt& model, torch::optim::AdamW& opt,
                    TrainProgress* progress, Json* prov) {
  const std::optional<ResumePoint>& from = req.resume ? req.resume : req.parent;
  if (!from) return Status::Ok();
  HEADLAB_RETURN_IF_ERROR(RestoreStartCheckpoint(*from, model, opt, progress));
  (*prov)["resumed_from_step"] = progress->step;
  (*prov)["parent_checkpoint_sha256"] = from->sha256;
  (*prov)["parent_checkpoint_path"] = from->path;
  if (req.parent && !req.resume) (*prov)["parent_run"] = req.parent_run;
  return Status::Ok();
}

// What both kinds set up (run_setup.h): device, output folder, the seeded model on the
// device, provenance.
struct TaskSetup {
  torch::Device device{torch::kCPU};
  Gpt model{nullptr};
  Json prov;
};

Status SetUpTask(const TrainRequest& req, const char* kind, TaskSetup* s) {
  const ExecConfig& c = req.config;
  HEADLAB_RETURN_IF_ERROR(PickDevice(c.train, /*rank=*/0, &s->device));
  HEADLAB_RETURN_IF_ERROR(MakeDirs(req.out_dir));
  Json init_prov = Json::object();
  StatusOr<Gpt> model = SeededModel(c, &init_prov);
  if (!model.ok()) return model.status();
  s->model = *model;
  HEADLAB_RETURN_IF_ERROR(PlaceModel(s->model, c.train, s->device));
  s->prov = RunProvenance(s->model, s->device);
  s->prov["kind"] = kind;
  s->prov.update(init_prov);
  return Status::Ok();
}

// ---- MQAR ----

StatusOr<MqarSpec> MqarSpecOf(const TrainRequest& req) {
  const Json& m = req.config_json.at("mqar");
  const ModelConfig& model = req.config.model;
  MqarSpec s;
  s.vocab = m.at("vocab").get<int64_t>() > 0 ? m.at("vocab").get<int64_t>() : model.vocab;
  s.seq_len = m.at("seq_len").get<int64_t>() > 0 ? m.at("seq_len").get<int64_t>() : model.context;
  s.pairs = m.at("pairs").get<int64_t>();
  s.power_a = m.at("power_a").get<double>();
  if (s.vocab > model.vocab)
    return Status::InvalidArgument(
        ConfigError("mqar.vocab", "must be <= model.vocab (" + std::to_string(model.vocab) + ")"));
  if (s.seq_len > model.context)
    return Status::InvalidArgument(ConfigError(
        "mqar.seq_len", "must be <= model.context (" + std::to_string(model.context) + ")"));
  Status v = ValidateMqar(s);
  if (!v.ok()) return Status::InvalidArgument(ConfigError("mqar", v.message()));
  return s;
}

// Examples [first, first + n) of generator stream `seed` as tokens and targets [n, T].
std::pair<torch::Tensor, torch::Tensor> MqarBatch(const MqarSpec& spec, uint64_t seed,
                                                  int64_t first, int64_t n, torch::Device device) {
  std::vector<int64_t> tokens, targets;
  for (int64_t i = 0; i < n; ++i) {
    MqarExample ex = GenerateMqar(spec, seed, uint64_t(first + i));
    tokens.insert(tokens.end(), ex.tokens.begin(), ex.tokens.end());
    targets.insert(targets.end(), ex.targets.begin(), ex.targets.end());
  }
  auto t = [&](std::vector<int64_t>& v) {
    return torch::tensor(v, torch::kLong).view({n, spec.seq_len}).to(device);
  };
  return {t(tokens), t(targets)};
}

// Summed cross-entropy and correct argmax predictions at the query positions (targets >= 0)
// of one batch, and how many there are.
struct QueryScore {
  torch::Tensor loss_sum;
  int64_t correct = 0, queries = 0;
};
QueryScore ScoreQueries(Gpt& model, const torch::Tensor& x, const torch::Tensor& y) {
  torch::Tensor logits = model->forward(x);
  torch::Tensor flat = logits.view({-1, logits.size(-1)}), target = y.reshape({-1});
  torch::Tensor mask = target != kNoTarget;
  QueryScore s;
  s.loss_sum = torch::nn::functional::cross_entropy(
      flat, target,
      torch::nn::functional::CrossEntropyFuncOptions().ignore_index(kNoTarget).reduction(
          torch::kSum));
  s.queries = mask.sum().item<int64_t>();
  s.correct = (flat.argmax(-1).eq(target) & mask).sum().item<int64_t>();
  return s;
}

// Loss (nats per query) and accuracy of the held-out examples.
std::pair<double, double> MqarEval(Gpt& model, const MqarSpec& spec, uint64_t seed,
                                   int64_t examples, int64_t batch, torch::Device device) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  double loss = 0;
  int64_t correct = 0, queries = 0;
  for (int64_t first = 0; first < examples; first += batch) {
    auto [x, y] = MqarBatch(spec, seed, first, std::min(batch, examples - first), device);
    QueryScore s = ScoreQueries(model, x, y);
    loss += s.loss_sum.item<double>();
    correct += s.correct;
    queries += s.queries;
  }
  model->train(was_training);
  const double q = double(std::max<int64_t>(1, queries));
  return {loss / q, double(correct) / q};
}

}  // namespace

Status RunMqar(const TrainRequest& req, EventSink* events) {
  const Clock::time_point t0 = Clock::now();
  const ExecConfig& c = req.config;
  const TrainConfig& t = c.train;
  StatusOr<MqarSpec> spec = MqarSpecOf(req);
  if (!spec.ok()) return spec.status();
  TaskSetup setup;
  HEADLAB_RETURN_IF_ERROR(SetUpTask(req, "mqar", &setup));
  Gpt& model = setup.model;
  std::unique_ptr<torch::optim::AdamW> opt = MakeOptimizer(model, t);
  Updater updater(model, *opt, t, model->precision(), setup.device);
  TrainProgress progress;
  HEADLAB_RETURN_IF_ERROR(RestoreStart(req, model, *opt, &progress, &setup.prov));
  const uint64_t train_seed = 2 * uint64_t(c.seed), eval_seed = train_seed + 1;
  const int64_t eval_examples = req.config_json.at("mqar").at("eval_examples").get<int64_t>();
  setup.prov["mqar_vocab"] = spec->vocab;
  setup.prov["mqar_seq_len"] = spec->seq_len;
  setup.prov["mqar_pairs"] = spec->pairs;
  setup.prov["mqar_power_a"] = spec->power_a;
  events->Provenance(setup.prov);

  const int64_t per_update = t.batch_size * t.grad_accum;
  // mqar.updates > 0: that many updates past the start checkpoint, whatever step it holds
  // (parents that stopped at different steps under matched time, SAF App. C.3.6).
  const int64_t updates = req.config_json.at("mqar").value("updates", int64_t{0});
  const int64_t last_step = updates > 0 ? progress.step + updates : t.steps;
  double eval_loss = std::nan(""), accuracy = std::nan(""), last_loss = std::nan("");
  int64_t evaluated_at = -1, saved_at = progress.step;
  auto evaluate = [&]() {
    std::tie(eval_loss, accuracy) =
        MqarEval(model, *spec, eval_seed, eval_examples, t.batch_size, setup.device);
    evaluated_at = progress.step;
    events->Metric(progress.step, metric::kMqarLoss, eval_loss);
    events->Metric(progress.step, metric::kMqarAccuracy, accuracy);
    LogInfo("mqar step " + std::to_string(progress.step) + ": query loss " +
            std::to_string(eval_loss) + ", accuracy " + std::to_string(accuracy));
  };
  auto save = [&]() -> Status {
    HEADLAB_RETURN_IF_ERROR(
        SaveCheckpoint(req.out_dir, req.config_json, model, *opt, progress, events));
    saved_at = progress.step;
    return Status::Ok();
  };
  while (progress.step < last_step) {
    if (StopRequested())
      return Status::Cancelled("stopped by signal at step " + std::to_string(progress.step));
    const double lr = ScheduledLr(t, double(progress.step));
    for (auto& g : opt->param_groups())
      static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
    updater.Begin();
    double loss = 0;
    for (int64_t micro = 0; micro < t.grad_accum; ++micro) {
      // Update u's sequences are examples [u * per_update, (u + 1) * per_update): the data
      // order depends on the step alone, so a resume needs no sampler state.
      auto [x, y] = MqarBatch(*spec, train_seed, progress.step * per_update + micro * t.batch_size,
                              t.batch_size, setup.device);
      QueryScore s = ScoreQueries(model, x, y);
      torch::Tensor part =
          s.loss_sum / double(std::max<int64_t>(1, s.queries)) / double(t.grad_accum);
      updater.Backward(part);
      loss += part.item<double>();
    }
    updater.Apply();
    ++progress.step;
    last_loss = loss;
    if (progress.step % t.log_every == 0 || progress.step == last_step) {
      events->Metric(progress.step, metric::kMqarTrainLoss, loss);
      events->Metric(progress.step, metric::kTrainLr, lr);
      events->Metric(progress.step, metric::kTrainTokens,
                     double(progress.step * per_update * spec->seq_len));
    }
    if (t.eval_every > 0 && progress.step % t.eval_every == 0 && progress.step < last_step)
      evaluate();
    if (t.checkpoint_every > 0 && progress.step % t.checkpoint_every == 0 &&
        progress.step < last_step)
      HEADLAB_RETURN_IF_ERROR(save());
  }
  if (evaluated_at != progress.step) evaluate();
  if (saved_at != progress.step) HEADLAB_RETURN_IF_ERROR(save());
  Json values = {{metric::kMqarLoss, eval_loss},
                 {metric::kMqarAccuracy, accuracy},
                 {metric::kElapsedS, SecondsSince(t0)}};
  if (!std::isnan(last_loss)) values[metric::kMqarTrainLoss] = last_loss;
  events->Summary(values);
  return Status::Ok();
}

// ---- passkey ----

namespace {

// Greedy continuation of `prompts` [n, L] by `count` tokens: [n, count].
torch::Tensor GreedyDecode(Gpt& model, torch::Tensor prompts, int64_t count) {
  std::vector<torch::Tensor> out;
  for (int64_t i = 0; i < count; ++i) {
    torch::Tensor next = model->forward(prompts).select(1, prompts.size(1) - 1).argmax(-1, true);
    out.push_back(next);
    prompts = torch::cat({prompts, next}, 1);
  }
  return torch::cat(out, 1);
}

std::string CellName(int64_t length, double depth) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%sL%lld.D%lld", metric::kPasskeyCellPrefix,
                static_cast<long long>(length), static_cast<long long>(std::llround(depth * 100)));
  return buf;
}

}  // namespace

Status RunPasskey(const TrainRequest& req, EventSink* events) {
  const Clock::time_point t0 = Clock::now();
  const ExecConfig& c = req.config;
  const Json& p = req.config_json.at("passkey");
  // Prompts in the model's token ids: the import's tokenizer, or the training data's.
  std::optional<ShardMeta> meta;
  if (c.data.source != "builtin") {
    StatusOr<ShardMeta> m =
        ReadShardMeta(c.data.source == "corpus" ? DefaultCorpusDir(c.data.path) : c.data.path);
    if (m.ok()) meta = m.value();
  }
  StatusOr<PasskeyCodec> codec = PasskeyCodec::For(c.model, meta ? &*meta : nullptr);
  if (!codec.ok()) return Status::InvalidArgument(ConfigError("model", codec.status().message()));
  const std::string lengths_text = p.at("lengths").get<std::string>();
  StatusOr<std::vector<int64_t>> lengths =
      // "" = the context less room for the answer (" N": 6 bytes, fewer tokens otherwise).
      lengths_text.empty()
          ? StatusOr<std::vector<int64_t>>(std::vector<int64_t>{c.model.context - 6})
          : ParsePositiveIntList(lengths_text);
  if (!lengths.ok())
    return Status::InvalidArgument(ConfigError("passkey.lengths", lengths.status().message()));
  StatusOr<std::vector<double>> depths = ParseFractionList(p.at("depths").get<std::string>());
  if (depths.ok() && depths->empty())
    depths = Status::InvalidArgument("expected at least one depth");
  if (!depths.ok())
    return Status::InvalidArgument(ConfigError("passkey.depths", depths.status().message()));
  const int64_t samples = p.at("samples").get<int64_t>();
  // Every prompt of a cell is generated up front, so bad lengths fail before any work.
  struct Cell {
    int64_t length;  // tokens (AoH §6.1)
    double depth;
    PasskeyCellPrompts prompts;  // batches of one answer token count
  };
  std::vector<Cell> cells;
  for (int64_t length : *lengths)
    for (double depth : *depths) {
      StatusOr<PasskeyCellPrompts> prompts =
          MakePasskeyPrompts(codec.value(), length, depth, uint64_t(c.seed), samples);
      if (!prompts.ok())
        return Status::InvalidArgument(ConfigError("passkey", prompts.status().message()));
      for (const PasskeyGroup& g : prompts->groups)
        if (g.length + g.answer_tokens - 1 > c.model.context)
          return Status::InvalidArgument(ConfigError(
              "passkey.lengths", "a prompt of " + std::to_string(length) + " tokens and its " +
                                     std::to_string(g.answer_tokens) + "-token answer exceed " +
                                     "model.context " + std::to_string(c.model.context)));
      cells.push_back({length, depth, std::move(prompts.value())});
    }

  TaskSetup setup;
  HEADLAB_RETURN_IF_ERROR(SetUpTask(req, "passkey", &setup));
  Gpt& model = setup.model;
  std::unique_ptr<torch::optim::AdamW> opt = MakeOptimizer(model, c.train);
  TrainProgress progress;
  HEADLAB_RETURN_IF_ERROR(RestoreStart(req, model, *opt, &progress, &setup.prov));
  events->Provenance(setup.prov);
  model->eval();
  torch::NoGradGuard no_grad;

  Json values = Json::object(), rows = Json::array();
  int64_t correct_all = 0, total = 0;
  for (const Cell& cell : cells) {
    if (StopRequested()) return Status::Cancelled("stopped by signal");
    int64_t correct = 0;
    for (const PasskeyGroup& g : cell.prompts.groups) {
      const int64_t n = int64_t(g.examples.size());
      torch::Tensor prompts =
          torch::tensor(g.tokens, torch::kLong).view({n, g.length}).to(setup.device);
      torch::Tensor out =
          GreedyDecode(model, prompts, g.answer_tokens).to(torch::kCPU).contiguous();
      for (int64_t i = 0; i < n; ++i) {
        std::vector<int64_t> got(out[i].data_ptr<int64_t>(),
                                 out[i].data_ptr<int64_t>() + g.answer_tokens);
        correct += codec->Matches(got, cell.prompts.answers[g.examples[size_t(i)]]);
      }
    }
    const double acc = double(correct) / double(samples);
    values[CellName(cell.length, cell.depth)] = acc;
    events->Metric(progress.step, CellName(cell.length, cell.depth), acc);
    rows.push_back({{"length", cell.length},
                    {"depth", cell.depth},
                    {"samples", samples},
                    {"correct", correct},
                    {"accuracy", acc}});
    correct_all += correct;
    total += samples;
  }
  const double accuracy = double(correct_all) / double(std::max<int64_t>(1, total));
  events->Metric(progress.step, metric::kPasskeyAccuracy, accuracy);
  const std::string path = req.out_dir + "/passkey.json";
  const std::string bytes = CanonicalJson(Json{{"cells", rows}, {"accuracy", accuracy}});
  HEADLAB_RETURN_IF_ERROR(WriteFileAtomic(path, bytes));
  events->Artifact("passkey", path, Sha256Hex(bytes), bytes.size(), progress.step);
  values[metric::kPasskeyAccuracy] = accuracy;
  values[metric::kElapsedS] = SecondsSince(t0);
  events->Summary(values);
  LogInfo("passkey: accuracy " + std::to_string(accuracy) + " over " + std::to_string(total) +
          " prompts");
  return Status::Ok();
}

}  // namespace headlab
