// SAF through the real training loop (RunTraining + MakeMethodHooks) on a tiny model:
// events, artifacts, metrics, summary, resume across an event, pruning control, trainable
// alpha/rho, and configurations refused before training.
#include "payload/methods/saf/train_hooks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "common/files.h"
#include "common/metric_names.h"
#include "common/run_config.h"
#include "payload/exec/method_hooks.h"
#include "payload/exec/test_util.h"
#include "payload/exec/train.h"
#include "payload/exec/train_testing.h"
#include "payload/methods/saf/saf_metrics.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

namespace headlab::saf {
namespace {

// What one run emitted, with its status and its saf_head_map files parsed.
struct Emitted : headlab::testing::TrainEvents {
  Status status;
  std::vector<Json> head_maps;  // each file, with the artifact's step as artifact_step
};

// A 2 x 4-head model (k = round(0.25 * 8) = 2), 6 updates, SAF at the midpoint (step 3)
// with quick fits; `overrides` is merge-patched onto that config.
StatusOr<TrainRequest> Request(const std::string& name, const Json& overrides) {
  Json config = {{"seed", 5},
                 {"model", {{"layers", 2}, {"heads", 4}, {"width", 32}, {"context", 32}}},
                 {"train",
                  {{"threads", 1},
                   {"batch_size", 4},
                   {"warmup_steps", 1},
                   {"device", "cpu"},
                   {"steps", 6},
                   {"log_every", 1},
                   {"eval_every", 0},
                   {"eval_batches", 1},
                   {"checkpoint_every", 2}}},
                 {"saf",
                  {{"method", "replace"},
                   {"rate", 0.25},
                   {"calib_sequences", 4},
                   {"calib_batch", 2},
                   {"fit_steps", 150}}}};
  if (overrides.is_object()) config.merge_patch(overrides);  // {} in C++ is null
  return headlab::testing::MakeTrainRequest(config, "grid.jsonc", "headlab_saf_hooks_" + name);
}

Emitted Run(const TrainRequest& req) {
  Emitted out;
  static_cast<headlab::testing::TrainEvents&>(out) =
      headlab::testing::CollectTrainingEvents(req, &out.status);
  for (const Json& j : out.by_kind["saf_head_map"]) {
    StatusOr<std::string> text = ReadFile(j["path"]);
    REQUIRE(text.ok());
    Json file = Json::parse(text.value());
    file["artifact_step"] = j["step"];
    out.head_maps.push_back(file);
  }
  return out;
}

Emitted RunOk(const std::string& name, const Json& overrides) {
  StatusOr<TrainRequest> req = Request(name, overrides);
  INFO(req.status().message());
  REQUIRE(req.ok());
  Emitted e = Run(*req);
  INFO(e.status.message());
  REQUIRE(e.status.ok());
  headlab::testing::RemoveTree(req->out_dir);
  return e;
}

// Resumes a copy of `overrides`'s run from the uninterrupted run a's checkpoint at `from`;
// checks it succeeded and that every later loss and the final evaluation match a's bitwise.
Emitted ResumeMatches(const Emitted& a, const std::string& name, const Json& overrides,
                      int64_t from) {
  StatusOr<TrainRequest> cont = Request(name + "_" + std::to_string(from), overrides);
  REQUIRE(cont.ok());
  cont->resume = a.ResumeAt(from);
  Emitted b = Run(*cont);
  INFO("resumed from " << from << ": " << b.status.message());
  REQUIRE(b.status.ok());
  for (int64_t step = from + 1; step <= 6; ++step)
    CHECK(a.metrics.at(metric::kTrainLoss).at(step) == b.metrics[metric::kTrainLoss].at(step));
  CHECK(a.summary[metric::kEvalLoss] == b.summary[metric::kEvalLoss]);
  headlab::testing::RemoveTree(cont->out_dir);
  return b;
}

int64_t CountRole(const Json& event, const std::string& role) {
  int64_t n = 0;
  for (const Json& row : event["head_map"]) n += row["role"] == role;
  return n;
}

TEST_CASE("saf hooks: a one-time midpoint event is installed, reported and summarised") {
  Emitted e = RunOk("one_time", {});
  REQUIRE(e.head_maps.size() == 1);
  const Json& ev = e.head_maps[0];
  CHECK(ev["artifact_step"] == 3);
  CHECK(ev["step"] == 3);
  CHECK(ev["k"] == 2);
  CHECK(ev["head_map"].size() == 8);
  CHECK(CountRole(ev, "fixed") == 2);
  for (const Json& row : ev["head_map"])
    if (row["role"] == "fixed") CHECK(row["fit_kl"].get<double>() <= 0.2);
  CHECK(ev["cost_s"]["total"].get<double>() > 0);
  CHECK(e.summary[metric::kSafHeadsFixed] == 2);
  CHECK(e.summary[metric::kSafHeadsPruned] == 0);
  CHECK(e.summary[metric::kSafEvents] == 1);
  CHECK(e.summary[metric::kSafEventStep] == 3);
  CHECK(e.summary[metric::kSafFitKlMax].get<double>() <= 0.2);
  for (const char* key :
       {metric::kSafCostCalibrationS, metric::kSafCostRankingS, metric::kSafCostFittingS,
        metric::kSafCostInstallationS, metric::kSafCostTotalS})
    CHECK(e.summary[key].get<double>() > 0);
  // The event's metrics at its step.
  CHECK(e.metrics[metric::kSafCostTotalS].count(3) == 1);
  CHECK(e.metrics[metric::kSafHeadsFixed].at(3) == 2);
  CHECK(e.metrics[metric::kSafHeadsFixed].size() == 1);
  // The variance selection overlaps itself entirely; the spread is a share.
  CHECK(ev["overlap_variance"] == 2);
  CHECK(e.summary[metric::kSafOverlapVariance] == 2);
  CHECK(ev["variance_spread"]["layer_sd"].size() == 2);
  const double share = e.summary[metric::kSafVarianceWithinShare].get<double>();
  CHECK((share >= 0 && share <= 1));
}

TEST_CASE("saf hooks: both random controls report their overlap with the variance selection") {
  Emitted variance = RunOk("ctl_variance", {});
  std::vector<std::pair<int64_t, int64_t>> chosen;
  for (const Json& row : variance.head_maps[0]["head_map"])
    if (row["role"] == "fixed") chosen.emplace_back(row["layer"], row["head"]);
  for (const char* score : {"random", "random_global"}) {
    Emitted e =
        RunOk(std::string("ctl_") + score, {{"saf", {{"score", score}, {"selection_seed", 3}}}});
    REQUIRE(e.head_maps.size() == 1);
    const Json& ev = e.head_maps[0];
    CHECK(ev["score"] == score);
    CHECK(CountRole(ev, "fixed") == 2);
    // Brute force: count this arm's fixed heads among the variance arm's (same parent
    // state, same calibration draws: the same variance selection).
    int64_t overlap = 0;
    for (const Json& row : ev["head_map"])
      if (row["role"] == "fixed")
        overlap +=
            std::count(chosen.begin(), chosen.end(),
                       std::make_pair(row["layer"].get<int64_t>(), row["head"].get<int64_t>()));
    INFO(score);
    CHECK(ev["overlap_variance"] == overlap);
    CHECK(e.summary[metric::kSafOverlapVariance] == overlap);
    CHECK(ev["variance_spread"] == variance.head_maps[0]["variance_spread"]);
  }
}

TEST_CASE("saf hooks: the validation-budget controller needs a split of its own") {
  const Json budget = {{"schedule", "validation_budget"}, {"groups", 2}, {"check_every", 2}};
  StatusOr<TrainRequest> r = Request("budget_no_split", {{"saf", budget}});
  REQUIRE(r.ok());
  Emitted refused = Run(*r);
  CHECK_FALSE(refused.status.ok());
  CHECK(refused.status.message().find("data.calib_fraction") != std::string::npos);
  headlab::testing::RemoveTree(r->out_dir);
  Emitted e = RunOk("budget_split", {{"saf", budget}, {"data", {{"calib_fraction", 0.2}}}});
  CHECK(e.provenance["saf_calib_split"] == "train");
  CHECK(e.summary.contains(metric::kSafEvents));
}

TEST_CASE("saf hooks: a resume across the event neither repeats nor loses it") {
  StatusOr<TrainRequest> full = Request("resume_full", {});
  INFO(full.status().message());
  REQUIRE(full.ok());
  Emitted a = Run(*full);
  REQUIRE(a.status.ok());
  for (int64_t from : {2, 4}) {  // before the event (step 3) and after it
    Emitted b = ResumeMatches(a, "resume", {}, from);
    CHECK(b.head_maps.size() == (from < 3 ? 1u : 0u));
    CHECK(b.summary[metric::kSafEvents] == 1);
    CHECK(b.summary[metric::kSafHeadsFixed] == 2);
    CHECK(b.summary[metric::kSafCostTotalS].get<double>() > 0);
  }
  headlab::testing::RemoveTree(full->out_dir);
}

TEST_CASE("saf hooks: a run with dense fixed patterns resumes after its event exactly") {
  const Json dense = {{"saf", {{"storage", "dense"}}}};
  StatusOr<TrainRequest> full = Request("dense_full", dense);
  REQUIRE(full.ok());
  Emitted a = Run(*full);
  INFO(a.status.message());
  REQUIRE(a.status.ok());
  Emitted b = ResumeMatches(a, "dense_resume", dense, 4);  // after the event (step 3)
  CHECK(b.head_maps.empty());
  CHECK(b.summary[metric::kSafHeadsFixed] == 2);
  headlab::testing::RemoveTree(full->out_dir);
}

TEST_CASE("saf hooks: tau = 1 replaces after training; the final evaluation sees it") {
  Emitted e = RunOk("tau1", {{"saf", {{"tau", 1.0}}}});
  REQUIRE(e.head_maps.size() == 1);
  CHECK(e.head_maps[0]["step"] == 6);
  CHECK(e.summary[metric::kSafEventStep] == 6);
  CHECK(e.summary[metric::kSafHeadsFixed] == 2);
  // Training itself was ordinary: the same losses as an arm without SAF.
  Emitted plain = RunOk("tau1_plain", {{"saf", {{"method", "none"}}}});
  CHECK(plain.summary.count(metric::kSafHeadsFixed) == 0);
  for (int64_t step = 1; step <= 6; ++step)
    CHECK(e.metrics[metric::kTrainLoss].at(step) == plain.metrics[metric::kTrainLoss].at(step));
  CHECK(e.summary[metric::kEvalLoss] != plain.summary[metric::kEvalLoss]);
}

TEST_CASE("saf hooks: the pruning control removes the heads SAF would fix") {
  Emitted fixed = RunOk("control_fixed", {});
  Emitted pruned = RunOk("control_pruned", {{"saf", {{"method", "prune"}}}});
  CHECK(pruned.summary[metric::kSafHeadsPruned] == 2);
  CHECK(pruned.summary[metric::kSafHeadsFixed] == 0);
  REQUIRE(pruned.head_maps.size() == 1);
  std::vector<std::pair<int64_t, int64_t>> a, b;
  for (const Json& row : fixed.head_maps[0]["head_map"])
    if (row["role"] == "fixed") a.emplace_back(row["layer"], row["head"]);
  for (const Json& row : pruned.head_maps[0]["head_map"])
    if (row["role"] == "pruned") b.emplace_back(row["layer"], row["head"]);
  CHECK(a == b);
}

TEST_CASE("saf hooks: trainable alpha/rho train after the event, frozen ones do not") {
  // The event after update 1 and a high constant learning rate, so that five AdamW steps
  // move alpha/rho visibly (at the default settings their effect on a float32 loss is below
  // its resolution).
  const Json common = {{"train", {{"lr", 0.03}, {"min_lr_ratio", 1.0}}}, {"saf", {{"tau", 0.2}}}};
  Json with = common;
  with["saf"]["trainable"] = 1;
  Emitted frozen = RunOk("frozen", common);
  Emitted trainable = RunOk("trainable", with);
  CHECK(trainable.summary[metric::kSafHeadsTrainable] == 2);
  // Identical up to the event and its first update (same init, data, fits); then the
  // patterns move.
  CHECK(trainable.head_maps.at(0)["step"] == 1);
  CHECK(trainable.metrics[metric::kTrainLoss].at(1) == frozen.metrics[metric::kTrainLoss].at(1));
  // Update 2: the same patterns, log Z recomputed in float32 instead of read from the fit.
  CHECK(trainable.metrics[metric::kTrainLoss].at(2) ==
        Approx(frozen.metrics[metric::kTrainLoss].at(2)).epsilon(1e-4));
  CHECK(trainable.metrics[metric::kTrainLoss].at(6) != frozen.metrics[metric::kTrainLoss].at(6));
  CHECK(trainable.summary[metric::kEvalLoss] != frozen.summary[metric::kEvalLoss]);
}

TEST_CASE("saf hooks: a trainable run resumes after its event exactly") {
  // The checkpoint holds the alpha/rho optimiser slots (head_states) and their AdamW
  // moments; the resumed run re-creates the tensors there and continues bitwise.
  const Json with = {{"train", {{"lr", 0.03}, {"min_lr_ratio", 1.0}}},
                     {"saf", {{"tau", 0.2}, {"trainable", 1}}}};
  StatusOr<TrainRequest> full = Request("trainable_full", with);
  REQUIRE(full.ok());
  Emitted a = Run(*full);
  INFO(a.status.message());
  REQUIRE(a.status.ok());
  REQUIRE(a.head_maps.at(0)["step"] == 1);
  for (int64_t from : {2, 4}) {  // both after the event: alpha/rho in the optimiser
    Emitted b = ResumeMatches(a, "trainable_resume", with, from);
    CHECK(b.head_maps.empty());
    CHECK(b.summary[metric::kSafHeadsTrainable] == 2);
  }
  headlab::testing::RemoveTree(full->out_dir);
}

TEST_CASE("saf hooks: the hybrid layer's trainable alpha/rho get gradients and sync") {
  torch::manual_seed(1);
  HybridAttention layer(16, 2, 2, 8);
  torch::Tensor x = torch::randn({2, 8, 16});
  layer->SetFixedCompact(1, torch::randn({8}), torch::randn({8}), torch::zeros({8}));
  layer->fixed_log_z[1].copy_(CompactLogNormalizer(layer->fixed_alpha[1], layer->fixed_rho[1]));
  torch::Tensor frozen_out = layer->forward(x).detach();
  auto [alpha, rho] = layer->MakeFixedTrainable(1);
  CHECK(layer->fixed_trainable(1));
  CHECK_FALSE(layer->fixed_trainable(0));
  // Same pattern, so the same output, before any update.
  CHECK(torch::allclose(layer->forward(x), frozen_out, 1e-5, 1e-6));
  layer->forward(x).pow(2).sum().backward();
  REQUIRE(alpha.grad().defined());
  CHECK(alpha.grad().abs().sum().item<double>() > 0);
  CHECK(rho.grad().abs().sum().item<double>() > 0);
  {
    torch::NoGradGuard g;
    alpha.sub_(alpha.grad());
    rho.sub_(rho.grad());
  }
  layer->SyncTrainableFixed();
  CHECK(torch::equal(layer->fixed_alpha[1], alpha.detach()));
  torch::Tensor p =
      CompactPattern(layer->fixed_alpha[1], layer->fixed_rho[1], layer->fixed_log_z[1], 8);
  CHECK(torch::allclose(p.sum(1), torch::ones({8}), 1e-5, 1e-6));  // rows still sum to 1
  // Any new state freezes the head again.
  layer->SetHeadState(1, HeadState{});
  CHECK_FALSE(layer->fixed_trainable(1));
}

TEST_CASE("saf hooks: configurations that cannot run are refused before training") {
  auto refused = [](const Json& saf) {
    StatusOr<TrainRequest> r = Request("refused", {{"saf", saf}});
    INFO(saf.dump());
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == Status::Code::kInvalidArgument);
    CHECK(r.status().message().find("grid.jsonc") != std::string::npos);
    return r.status().message();
  };
  CHECK(refused({{"trainable", 1}, {"storage", "dense"}}).find("saf.trainable") !=
        std::string::npos);
  CHECK(refused({{"heads", "0.9"}}).find("saf.heads") != std::string::npos);
  CHECK(refused({{"rate", 2}}).find("rate") != std::string::npos);
  // A fit threshold nothing meets fails the run at its event, with the reason.
  StatusOr<TrainRequest> r = Request("no_fit", {{"saf", {{"fit_max_kl", 0}}}});
  REQUIRE(r.ok());
  Emitted e = Run(*r);
  CHECK_FALSE(e.status.ok());
  CHECK(e.status.message().find("fit") != std::string::npos);
  headlab::testing::RemoveTree(r->out_dir);
}

}  // namespace
}  // namespace headlab::saf
