#include "payload/exec/train.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include <torch/torch.h>

#include "common/files.h"
#include "common/metric_names.h"
#include "common/run_config.h"
#include "common/sha256.h"
#include "payload/exec/attention_cuda.h"
#include "payload/exec/checkpoint.h"
#include "payload/exec/model.h"
#include "payload/exec/stop_flag.h"
#include "payload/exec/test_util.h"
#include "payload/exec/train_hooks.h"
#include "payload/exec/train_testing.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab {
namespace {

// A run small enough for a unit test: defaults <- tiny model <- `overrides`.
TrainRequest TinyRun(const std::string& name, const Json& overrides) {
  Json config = {{"seed", 3},
                 {"model", {{"layers", 1}, {"heads", 2}, {"width", 32}, {"context", 32}}},
                 {"train",
                  {{"threads", 1},
                   {"batch_size", 4},
                   {"warmup_steps", 2},
                   {"device", "cpu"}}}};  // the bitwise claims are for CPU
  config.merge_patch(overrides);
  StatusOr<TrainRequest> req = testing::MakeTrainRequest(config, "test", "headlab_exec_" + name);
  REQUIRE(req.ok());
  return req.value();
}

using Events = testing::TrainEvents;
constexpr auto Run = testing::CollectTrainingEvents;

TEST_CASE("train: the learning-rate schedule warms up linearly and decays by cosine") {
  TrainConfig t;
  t.lr = 1.0;
  t.min_lr_ratio = 0.1;
  t.warmup_steps = 10;
  t.steps = 110;
  CHECK(ScheduledLr(t, 0) == Approx(0.1));
  CHECK(ScheduledLr(t, 9) == Approx(1.0));
  CHECK(ScheduledLr(t, 10) == Approx(1.0));
  CHECK(ScheduledLr(t, 59) == Approx(0.55).margin(0.01));
  CHECK(ScheduledLr(t, 109) == Approx(0.1));
}

TEST_CASE("train: loss decreases on the builtin corpus") {
  TrainRequest req = TinyRun("decrease", {{"train",
                                           {{"steps", 40},
                                            {"log_every", 1},
                                            {"eval_every", 0},
                                            {"eval_batches", 4},
                                            {"checkpoint_every", 0}}}});
  Status st;
  Events ev = Run(req, &st);
  REQUIRE(st.ok());
  const double first = ev.metrics[metric::kTrainLoss].at(1);
  CHECK(first == Approx(std::log(256.0)).margin(0.3));  // uniform at init
  const double eval = ev.summary[metric::kEvalLoss].get<double>();
  CHECK(eval < first - 1.0);
  CHECK(ev.summary[metric::kEvalPpl].get<double>() == Approx(std::exp(eval)));
  CHECK(ev.provenance["dataset_sha256"].get<std::string>().size() == 64);
  REQUIRE(ev.artifacts.size() == 2);  // the final log-probs and checkpoint
  CHECK(ev.checkpoints.at(0)["step"] == 40);
  const Json& lp = ev.artifacts[0];
  CHECK(lp["kind"] == "logprobs");
  StatusOr<std::string> bytes = ReadFile(lp["path"]);
  REQUIRE(bytes.ok());
  CHECK(Sha256Hex(bytes.value()) == lp["sha256"]);
  REQUIRE(bytes->size() == size_t(4 * 4 * 32) * sizeof(float));  // eval_batches x batch x context
  double nats = 0;
  for (size_t i = 0; i < bytes->size(); i += 4) {
    float v;
    std::memcpy(&v, bytes->data() + i, 4);
    CHECK(v <= 0.0f);
    nats -= v;
  }
  CHECK(nats / double(bytes->size() / 4) == Approx(eval).epsilon(1e-9));
  testing::RemoveTree(req.out_dir);
}

TEST_CASE("train: a run resumed from its checkpoint is bitwise identical on CPU") {
  const Json train = {{"train",
                       {{"steps", 6},
                        {"log_every", 1},
                        {"eval_every", 3},
                        {"eval_batches", 2},
                        {"checkpoint_every", 3}}}};
  TrainRequest full = TinyRun("resume_full", train);
  Status st;
  Events a = Run(full, &st);
  REQUIRE(st.ok());
  REQUIRE(a.checkpoints.size() == 2);
  const Json& mid = a.checkpoints[0];
  CHECK(mid["step"] == 3);
  CHECK(Sha256File(mid["path"]).value() == mid["sha256"]);
  CHECK(!PathExists(mid["path"].get<std::string>() + ".tmp"));

  TrainRequest cont = TinyRun("resume_cont", train);
  cont.resume = ResumePoint{mid["path"], mid["sha256"], 3};
  Events b = Run(cont, &st);
  REQUIRE(st.ok());
  for (int64_t step = 4; step <= 6; ++step)
    CHECK(a.metrics[metric::kTrainLoss].at(step) == b.metrics[metric::kTrainLoss].at(step));
  CHECK(b.metrics[metric::kTrainLoss].count(3) == 0);
  CHECK(a.metrics[metric::kEvalLoss].at(6) == b.metrics[metric::kEvalLoss].at(6));
  CHECK(b.provenance["parent_checkpoint_sha256"] == mid["sha256"]);

  // The final weights and optimizer moments agree exactly as well.
  auto load = [](const std::string& path) {
    torch::serialize::InputArchive archive;
    archive.load_from(path);
    return archive;
  };
  torch::serialize::InputArchive fa = load(a.checkpoints.at(1)["path"]);
  torch::serialize::InputArchive fb = load(b.checkpoints.at(0)["path"]);
  torch::serialize::InputArchive ma, mb;
  fa.read("model", ma);
  fb.read("model", mb);
  Gpt wa(full.config.model), wb(full.config.model);
  wa->load(ma);
  wb->load(mb);
  auto pa = wa->named_parameters(), pb = wb->named_parameters();
  for (const auto& p : pa) {
    INFO(p.key());
    CHECK(torch::equal(p.value(), pb[p.key()]));
  }
  CHECK(!torch::equal(pa["wte.weight"], Gpt(full.config.model)->named_parameters()["wte.weight"]));

  // A wrong hash or step is refused before anything is trained.
  cont.resume->sha256 = std::string(64, '0');
  Run(cont, &st);
  CHECK(st.code() == Status::Code::kCorruption);
  cont.resume = ResumePoint{mid["path"], mid["sha256"], 4};
  Run(cont, &st);
  CHECK(st.code() == Status::Code::kCorruption);
  testing::RemoveTree(full.out_dir);
  testing::RemoveTree(cont.out_dir);
}

TEST_CASE("train: a continuation from a shared parent checkpoint starts at the parent's step") {
  const Json train = {{"train",
                       {{"steps", 6},
                        {"log_every", 1},
                        {"eval_every", 0},
                        {"eval_batches", 2},
                        {"checkpoint_every", 3}}}};
  TrainRequest full = TinyRun("parent_full", train);
  Status st;
  Events a = Run(full, &st);
  REQUIRE(st.ok());
  const Json& mid = a.checkpoints.at(0);

  // Same config as the parent: the continuation is the uninterrupted run from step 3.
  TrainRequest child = TinyRun("parent_child", train);
  child.parent = ResumePoint{mid["path"], mid["sha256"], 3};
  child.parent_run = 41;
  Events b = Run(child, &st);
  REQUIRE(st.ok());
  CHECK(b.metrics[metric::kTrainLoss].count(3) == 0);
  for (int64_t step = 4; step <= 6; ++step)
    CHECK(a.metrics[metric::kTrainLoss].at(step) == b.metrics[metric::kTrainLoss].at(step));
  CHECK(b.provenance["parent_run"] == 41);
  CHECK(b.provenance["parent_checkpoint_sha256"] == mid["sha256"]);
  CHECK(b.provenance["parent_step"] == 3);

  // An arm with other head modes starts from the same weights and then diverges.
  TrainRequest pruned = TinyRun(
      "parent_pruned", {{"train", train["train"]}, {"model", {{"head_modes", "*.1=pruned"}}}});
  pruned.parent = child.parent;
  pruned.parent_run = 41;
  Events c = Run(pruned, &st);
  REQUIRE(st.ok());
  CHECK(c.metrics[metric::kTrainLoss].at(4) != a.metrics[metric::kTrainLoss].at(4));

  // A requeued child resumes its own checkpoint, not the parent's.
  TrainRequest requeued = TinyRun("parent_requeued", train);
  requeued.parent = child.parent;
  requeued.parent_run = 41;
  const Json& own = b.checkpoints.at(0);  // the child's step-6 checkpoint
  requeued.resume = ResumePoint{own["path"], own["sha256"], 6};
  Events d = Run(requeued, &st);
  REQUIRE(st.ok());
  CHECK(d.metrics[metric::kTrainLoss].empty());  // nothing left to train
  CHECK(d.provenance["resumed_from_step"] == 6);

  // A parent checkpoint with another hash is refused before anything is trained.
  child.parent->sha256 = std::string(64, '0');
  Run(child, &st);
  CHECK(st.code() == Status::Code::kCorruption);
  for (const TrainRequest* r : {&full, &child, &pruned, &requeued}) testing::RemoveTree(r->out_dir);
}

TEST_CASE("train: k accumulated micro-batches equal one batch of k times the size") {
  auto config = [](int64_t batch, int64_t accum) {
    return Json{{"train",
                 {{"steps", 3},
                  {"log_every", 1},
                  {"eval_every", 0},
                  {"eval_batches", 1},
                  {"checkpoint_every", 0},
                  {"batch_size", batch},
                  {"grad_accum", accum}}}};
  };
  TrainRequest one = TinyRun("accum_one", config(8, 1));
  TrainRequest four = TinyRun("accum_four", config(2, 4));
  Status st;
  Events a = Run(one, &st);
  REQUIRE(st.ok());
  Events b = Run(four, &st);
  REQUIRE(st.ok());
  for (int64_t step = 1; step <= 3; ++step) {
    INFO("step " << step);
    CHECK(b.metrics[metric::kTrainLoss].at(step) ==
          Approx(a.metrics[metric::kTrainLoss].at(step)).epsilon(1e-5));
    CHECK(b.metrics[metric::kTrainGradNorm].at(step) ==
          Approx(a.metrics[metric::kTrainGradNorm].at(step)).epsilon(1e-4));
    CHECK(b.metrics[metric::kTrainTokens].at(step) == a.metrics[metric::kTrainTokens].at(step));
  }
  // (The training losses of steps 2 and 3 are computed with the weights after updates 1
  // and 2, so they check the updates too; eval.loss is not comparable here because the
  // evaluation batch is train.batch_size rows.)
  // Not vacuous: another batch composition changes the losses.
  Events c = Run(TinyRun("accum_other", config(4, 1)), &st);
  CHECK(c.metrics[metric::kTrainLoss].at(3) !=
        Approx(a.metrics[metric::kTrainLoss].at(3)).epsilon(1e-5));
  testing::RemoveTree(one.out_dir);
  testing::RemoveTree(four.out_dir);
  testing::RemoveTree(TinyRun("accum_other", config(4, 1)).out_dir);
}

TEST_CASE("checkpoint: head states (including installed fixed heads) survive a restore") {
  TrainRequest req = TinyRun("head_states", {{"model", {{"heads", 4}}}});
  Gpt model(req.config.model);
  torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(1e-3));
  const int64_t T = req.config.model.context;
  model->attention(0)->SetHeadState(0, HeadState{HeadMode::kLocal, 5});
  model->attention(0)->SetFixedCompact(
      1, torch::linspace(-1, 1, T), torch::linspace(0, -2, T),
      CompactLogNormalizer(torch::linspace(-1, 1, T), torch::linspace(0, -2, T)));
  std::string bytes = SerializeCheckpoint(model, opt, TrainProgress{7, ""}, "{}");

  Gpt fresh(req.config.model);
  torch::optim::AdamW fresh_opt(fresh->parameters(), torch::optim::AdamWOptions(1e-3));
  TrainProgress progress;
  REQUIRE(RestoreCheckpoint(bytes, "ck", fresh, fresh_opt, &progress).ok());
  const auto& states = fresh->attention(0)->head_states();
  CHECK(states[0].mode == HeadMode::kLocal);
  CHECK(states[0].window == 5);
  CHECK(states[1].mode == HeadMode::kFixed);
  CHECK(torch::equal(fresh->attention(0)->fixed_rho[1], torch::linspace(0, -2, T)));
  torch::Tensor x = torch::randint(0, 256, {2, 16}, torch::kLong);
  CHECK(torch::equal(model->forward(x), fresh->forward(x)));

  // A dense fixed pattern travels as its layer's fixed_dense tensor.
  model->attention(0)->SetFixedDense(
      2, torch::tril(torch::ones({T, T})) / torch::arange(1, T + 1).unsqueeze(1));
  bytes = SerializeCheckpoint(model, opt, TrainProgress{7, ""}, "{}");
  Gpt other(req.config.model);
  torch::optim::AdamW other_opt(other->parameters(), torch::optim::AdamWOptions(1e-3));
  REQUIRE(RestoreCheckpoint(bytes, "ck", other, other_opt, &progress).ok());
  CHECK(other->attention(0)->head_states()[2].dense);
  CHECK(torch::equal(other->attention(0)->fixed_dense[2], model->attention(0)->fixed_dense[2]));
  CHECK(torch::equal(model->forward(x), other->forward(x)));
}

TEST_CASE("train: a matched-time run stops within its allowance, lr following elapsed time") {
  TrainRequest req = TinyRun("timed", {{"train",
                                        {{"steps", 100000},
                                         {"log_every", 1},
                                         {"eval_every", 0},
                                         {"eval_batches", 1},
                                         {"checkpoint_every", 0},
                                         {"warmup_steps", 0},
                                         {"time_budget_s", 1.5}}}});
  Status st;
  Events ev = Run(req, &st);
  REQUIRE(st.ok());
  const auto& lrs = ev.metrics[metric::kTrainLr];
  REQUIRE(lrs.size() >= 2);
  CHECK(lrs.size() < 100000);
  CHECK(lrs.rbegin()->second < lrs.begin()->second);  // the schedule advanced with time
  // Updates are predicted by the slowest so far; allow one slower update under CPU contention.
  CHECK(ev.metrics[metric::kElapsedS].rbegin()->second <= 2.5);
  CHECK(ev.checkpoints.size() == 1);
  testing::RemoveTree(req.out_dir);
}

TEST_CASE("train: a stop request ends the run at a step boundary with no partial files") {
  TrainRequest req = TinyRun("stop", {{"train", {{"steps", 5}}}});
  RequestStop();
  Status st;
  Events ev = Run(req, &st);
  ClearStop();
  CHECK(st.code() == Status::Code::kCancelled);
  CHECK(ev.artifacts.empty());
  CHECK(testing::IsEmptyDir(req.out_dir));
  testing::RemoveTree(req.out_dir);
}

TEST_CASE("train: a context longer than the held-out split is refused") {
  TrainRequest req = TinyRun("bigctx", {{"model", {{"context", 131072}}}});
  Status st;
  Run(req, &st);
  CHECK(st.code() == Status::Code::kInvalidArgument);
  CHECK(st.message().find("model.context") != std::string::npos);
}

}  // namespace
}  // namespace headlab

namespace headlab {
namespace {

// Records every hook call; its state is the number of updates it has seen.
class RecordingHooks : public TrainHooks {
 public:
  const char* name() const override { return "recorder"; }
  Status OnStart(TrainContext& ctx, const std::optional<std::string>& saved, Json* prov) override {
    calls.push_back("start@" + std::to_string(ctx.step));
    if (saved) updates = std::stoi(*saved);
    (*prov)["recorder"] = true;
    return Status::Ok();
  }
  Status BeforeUpdate(TrainContext& ctx, const torch::Tensor& x) override {
    calls.push_back("before@" + std::to_string(ctx.step));
    CHECK(x.size(1) == ctx.config.model.context);
    return Status::Ok();
  }
  Status AfterBackward(TrainContext& ctx) override {
    // Gradients exist here and have not been applied yet.
    CHECK(ctx.model->wte->weight.grad().defined());
    return Status::Ok();
  }
  Status AfterUpdate(TrainContext& ctx, double loss) override {
    ++updates;
    calls.push_back("after@" + std::to_string(ctx.step));
    CHECK(std::isfinite(loss));
    return ctx.step == fail_at ? Status::Internal("recorder: fails at " + std::to_string(fail_at))
                               : Status::Ok();
  }
  void LogRow(TrainContext& /*ctx*/, MetricRow* row) override {
    row->push_back({"recorder.updates", double(updates)});
  }
  Status AfterTraining(TrainContext& ctx) override {
    calls.push_back("end@" + std::to_string(ctx.step));
    held_out = ctx.eval_loss(1);
    return Status::Ok();
  }
  Status Summarize(TrainContext& /*ctx*/, Json* values) override {
    (*values)["recorder.updates"] = updates;
    return Status::Ok();
  }
  std::string SaveState(TrainContext&) override { return std::to_string(updates); }

  std::vector<std::string> calls;
  int updates = 0;
  int64_t fail_at = -1;
  double held_out = 0;
};

TEST_CASE("train: method hooks are called in loop order and their state survives a resume") {
  const Json train = {{"train",
                       {{"steps", 4},
                        {"log_every", 1},
                        {"eval_every", 0},
                        {"eval_batches", 1},
                        {"checkpoint_every", 2}}}};
  TrainRequest full = TinyRun("hooks_full", train);
  auto rec = std::make_shared<RecordingHooks>();
  full.hooks = {rec};
  Status st;
  Events a = Run(full, &st);
  REQUIRE(st.ok());
  const std::vector<std::string> order = {"start@0",  "before@0", "after@1",  "before@1", "after@2",
                                          "before@2", "after@3",  "before@3", "after@4",  "end@4"};
  CHECK(rec->calls == order);
  CHECK(a.metrics["recorder.updates"].at(3) == 3);
  CHECK(a.summary["recorder.updates"] == 4);
  CHECK(a.provenance["recorder"] == true);
  CHECK(std::isfinite(rec->held_out));
  CHECK(rec->held_out > 0);

  // Resumed from step 2, the hook gets back the state it saved there.
  TrainRequest cont = TinyRun("hooks_cont", train);
  cont.resume = ResumePoint{a.checkpoints.at(0)["path"], a.checkpoints.at(0)["sha256"], 2};
  auto rec2 = std::make_shared<RecordingHooks>();
  cont.hooks = {rec2};
  Events b = Run(cont, &st);
  REQUIRE(st.ok());
  CHECK(rec2->calls.front() == "start@2");
  CHECK(b.summary["recorder.updates"] == 4);
  for (int64_t step = 3; step <= 4; ++step)
    CHECK(a.metrics[metric::kTrainLoss].at(step) == b.metrics[metric::kTrainLoss].at(step));

  // A failing hook fails the run with its message.
  TrainRequest bad = TinyRun("hooks_fail", train);
  auto rec3 = std::make_shared<RecordingHooks>();
  rec3->fail_at = 2;
  bad.hooks = {rec3};
  Run(bad, &st);
  CHECK(st.code() == Status::Code::kInternal);
  CHECK(st.message() == "recorder: fails at 2");
  for (const TrainRequest* r : {&full, &cont, &bad}) testing::RemoveTree(r->out_dir);
}

TEST_CASE("train: precision is a run setting, named in provenance; bf16 on the CPU tracks fp32") {
  const Json train = {{"train",
                       {{"steps", 8},
                        {"log_every", 1},
                        {"eval_every", 0},
                        {"eval_batches", 2},
                        {"checkpoint_every", 0}}}};
  std::map<std::string, Events> runs;
  for (const char* precision : {"fp32", "bf16"}) {
    Json config = train;
    config["train"]["precision"] = precision;
    TrainRequest req = TinyRun(std::string("precision_") + precision, config);
    Status st;
    runs[precision] = Run(req, &st);
    REQUIRE(st.ok());
    CHECK(runs[precision].provenance["precision"] == precision);
    testing::RemoveTree(req.out_dir);
  }
  CHECK(runs["fp32"].provenance["compute_dtype"] == "Float");
  CHECK(runs["bf16"].provenance["compute_dtype"] == "BFloat16");
  // bf16 rounds the matmuls (the losses differ) but trains the same model (they stay close).
  const double fp32 = runs["fp32"].summary[metric::kEvalLoss].get<double>();
  const double bf16 = runs["bf16"].summary[metric::kEvalLoss].get<double>();
  CHECK(fp32 != bf16);
  CHECK(std::abs(fp32 - bf16) < 0.05);
  // fp16 needs CUDA: refused before any step, naming the key.
  Json fp16 = train;
  fp16["train"]["precision"] = "fp16";
  TrainRequest req = TinyRun("precision_fp16", fp16);
  Status st;
  Events none = Run(req, &st);
  CHECK(st.code() == Status::Code::kInvalidArgument);
  CHECK(st.message().find("$.config.train.precision") != std::string::npos);
  CHECK(none.metrics.empty());
  testing::RemoveTree(req.out_dir);
}

TEST_CASE(
    "train: throughput is tokens per second of the timed updates; no MFU without a known peak") {
  TrainRequest req = TinyRun("throughput", {{"train",
                                             {{"steps", 5},
                                              {"log_every", 1},
                                              {"eval_every", 0},
                                              {"eval_batches", 1},
                                              {"checkpoint_every", 0},
                                              {"grad_accum", 2}}}});
  Status st;
  Events ev = Run(req, &st);
  REQUIRE(st.ok());
  const double tokens_per_s = ev.summary[metric::kTrainTokensPerS].get<double>();
  const double step_s = ev.summary[metric::kTrainStepS].get<double>();
  CHECK(tokens_per_s > 0);
  // One update is batch_size x grad_accum x context = 4 x 2 x 32 tokens.
  CHECK(tokens_per_s * step_s == Approx(4 * 2 * 32).epsilon(1e-9));
  CHECK(ev.metrics[metric::kTrainStepS].size() == 4);   // logged from step 2 on: step 1 is warm-up
  CHECK_FALSE(ev.summary.contains(metric::kTrainMfu));  // the CPU has no peak in the table
  CHECK_FALSE(ev.summary.contains(metric::kGpuPeakMemBytes));
  testing::RemoveTree(req.out_dir);
}

// A one-off intervention at a chosen update (as a SAF event would make): it changes head 0
// of layer 0 to a local window and then computes for `work_s` seconds (real matrix
// products), in BeforeUpdate or AfterUpdate.
class InterventionHooks : public TrainHooks {
 public:
  InterventionHooks(int64_t at, bool after_update, double work_s)
      : at_(at), after_update_(after_update), work_s_(work_s) {}
  const char* name() const override { return "intervention"; }
  Status BeforeUpdate(TrainContext& ctx, const torch::Tensor&) override {
    return after_update_ ? Status::Ok() : MaybeIntervene(ctx);
  }
  Status AfterUpdate(TrainContext& ctx, double) override {
    return after_update_ ? MaybeIntervene(ctx) : Status::Ok();
  }

 private:
  Status MaybeIntervene(TrainContext& ctx) {
    if (ctx.step != at_) return Status::Ok();
    ctx.model->attention(0)->SetHeadState(0, {HeadMode::kLocal, 4});
    const auto t0 = std::chrono::steady_clock::now();
    torch::Tensor a = torch::randn({128, 128});
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < work_s_)
      a = torch::tanh(torch::mm(a, a));
    ++ctx.interventions;
    return Status::Ok();
  }
  const int64_t at_;
  const bool after_update_;
  const double work_s_;
};

TEST_CASE(
    "train: an intervention's update is left out of the throughput, and the plans after it are "
    "recorded") {
  for (bool after_update : {false, true}) {
    INFO("intervention in " << (after_update ? "AfterUpdate" : "BeforeUpdate"));
    TrainRequest req = TinyRun("intervention", {{"train",
                                                 {{"steps", 7},
                                                  {"log_every", 1},
                                                  {"eval_every", 0},
                                                  {"eval_batches", 1},
                                                  {"checkpoint_every", 0}}}});
    constexpr double kWorkS = 2.0;
    // BeforeUpdate of update 4 (ctx.step 3), or AfterUpdate of update 3 (ctx.step 3): either
    // way update 4 is the first to run the changed layer.
    req.hooks = {std::make_shared<InterventionHooks>(3, after_update, kWorkS)};
    Status st;
    Events ev = Run(req, &st);
    REQUIRE(st.ok());
    // Counted: updates 2, 3, 5, 6, 7 (1 is warm-up, 4 re-plans). Had the 2 s of work been
    // counted, an update would average >= 0.4 s; the tiny model's take milliseconds.
    CHECK(ev.summary[metric::kTrainStepS].get<double>() < 0.2);
    // The after-event rate from update 5 on, logged from then on only.
    const auto& after = ev.metrics[metric::kTrainTokensPerSAfterEvent];
    CHECK(after.size() == 3);
    CHECK(after.begin()->first == 5);
    CHECK(ev.summary.contains(metric::kTrainTokensPerSAfterEvent));
    REQUIRE(ev.provenance["attention_plans"].size() == 1);
    CHECK(ev.provenance["attention_plans"][0]["step"] == 4);
    CHECK(ev.provenance["attention_plans"][0]["interventions"] == 1);
    CHECK(ev.provenance["attention_plans"][0].contains("attention_paths"));
    testing::RemoveTree(req.out_dir);
  }
  // Without an intervention: no after-event rate, no plan history.
  TrainRequest plain = TinyRun("no_intervention", {{"train",
                                                    {{"steps", 3},
                                                     {"log_every", 1},
                                                     {"eval_every", 0},
                                                     {"eval_batches", 1},
                                                     {"checkpoint_every", 0}}}});
  plain.hooks = {std::make_shared<InterventionHooks>(-1, false, 0.0)};
  Status st;
  Events ev = Run(plain, &st);
  REQUIRE(st.ok());
  CHECK_FALSE(ev.summary.contains(metric::kTrainTokensPerSAfterEvent));
  CHECK_FALSE(ev.provenance.contains("attention_plans"));
  testing::RemoveTree(plain.out_dir);
}

// A method that changes head states without an intervention (as AAH's control updates
// install windows): head 0 of layer 0 becomes local(4) before update `at` + 1.
class ReplanHooks : public TrainHooks {
 public:
  explicit ReplanHooks(int64_t at) : at_(at) {}
  const char* name() const override { return "replan"; }
  Status BeforeUpdate(TrainContext& ctx, const torch::Tensor&) override {
    if (ctx.step == at_) ctx.model->attention(0)->SetHeadState(0, {HeadMode::kLocal, 4});
    return Status::Ok();
  }

 private:
  const int64_t at_;
};

TEST_CASE("train: the attention paths in provenance are the last update's") {
  SetFastPathOnCpuForTesting(true);  // labels name the plans (CPU stand-ins)
  TrainRequest req = TinyRun("replan", {{"model", {{"layers", 2}, {"heads", 2}, {"width", 128}}},
                                        {"train",
                                         {{"steps", 4},
                                          {"log_every", 1},
                                          {"eval_every", 0},
                                          {"eval_batches", 1},
                                          {"checkpoint_every", 0}}}});
  req.hooks = {std::make_shared<ReplanHooks>(2)};
  Status st;
  Events ev = Run(req, &st);
  SetFastPathOnCpuForTesting(false);
  REQUIRE(st.ok());
  // Layer 0 took a plan of its own after update 3; layer 1 kept the first update's.
  const Json& paths = ev.provenance["attention_paths"];
  REQUIRE(paths.is_object());
  std::string layer0, layer1;
  for (const auto& [label, layers] : paths.items())
    for (const auto& l : layers) (l == 0 ? layer0 : layer1) = label;
  INFO(paths.dump());
  CHECK(layer0 != layer1);
  CHECK(layer1.find("sdpa[") != std::string::npos);
  CHECK_FALSE(ev.provenance.contains("attention_plans"));  // no intervention
  testing::RemoveTree(req.out_dir);
}

// A method's recurring work that changes nothing (as AAH's control updates): `work_s`
// seconds of real matrix products in every BeforeUpdate.
class RecurringHooks : public TrainHooks {
 public:
  explicit RecurringHooks(double work_s) : work_s_(work_s) {}
  const char* name() const override { return "recurring"; }
  Status BeforeUpdate(TrainContext&, const torch::Tensor&) override {
    const auto t0 = std::chrono::steady_clock::now();
    torch::Tensor a = torch::randn({128, 128});
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < work_s_)
      a = torch::tanh(torch::mm(a, a));
    return Status::Ok();
  }

 private:
  const double work_s_;
};

TEST_CASE("train: a method's recurring work is counted in the throughput") {
  TrainRequest req = TinyRun("recurring", {{"train",
                                            {{"steps", 4},
                                             {"log_every", 1},
                                             {"eval_every", 0},
                                             {"eval_batches", 1},
                                             {"checkpoint_every", 0}}}});
  constexpr double kWorkS = 0.25;
  req.hooks = {std::make_shared<RecurringHooks>(kWorkS)};
  Status st;
  Events ev = Run(req, &st);
  REQUIRE(st.ok());
  // Updates 2-4 are counted, each after 0.25 s of the hook's work: >= 0.25 s per update
  // (the tiny model's own update takes milliseconds).
  CHECK(ev.summary[metric::kTrainStepS].get<double>() >= kWorkS);
  CHECK_FALSE(ev.summary.contains(metric::kTrainTokensPerSAfterEvent));
  testing::RemoveTree(req.out_dir);
}

}  // namespace
}  // namespace headlab
