// The pruning controls through the real training loop (payload/exec/train.cc).
#include <algorithm>
#include <cstdio>
#include <map>

#include <torch/torch.h>

#include "common/files.h"
#include "common/metric_names.h"
#include "common/run_config.h"
#include "payload/exec/checkpoint.h"
#include "payload/exec/method_hooks.h"
#include "payload/exec/test_util.h"
#include "payload/exec/train.h"
#include "payload/exec/train_testing.h"
#include "payload/methods/pruning/prune_metrics.h"
#include "payload/methods/pruning/pruning_testing.h"

// Catch after everything that includes LibTorch: c10's logging defines CHECK too, and
// the definition included last is the one the tests use.
#include <catch2/catch.hpp>

// After LibTorch: its glog CHECK must not replace Catch's.

namespace headlab {
namespace {

// A tiny run (2 layers x 4 heads) with the prune hooks its config asks for.
TrainRequest PruneRun(const std::string& name, const Json& overrides) {
  return testing::TinyRunRequest(5, {overrides}, "headlab_prune_" + name);
}

using Events = testing::TrainEvents;
constexpr auto Run = testing::CollectTrainingEventsOk;

}  // namespace

TEST_CASE("prune hooks: a given head set is removed at the start and the smaller model trains") {
  TrainRequest req = PruneRun("heads", {{"prune", {{"method", "heads"}, {"heads", "0.1,1.2"}}}});
  Events ev = Run(req);
  CHECK(ev.summary[metric::kPruneHeadsRemoved] == 2);
  CHECK(ev.summary[metric::kPruneStep] == 0);
  // 2 heads x (Q rows + K rows + V rows + O columns) of 8 x 32 each.
  CHECK(ev.summary[metric::kPruneParamsBefore].get<double>() -
            ev.summary[metric::kPruneParams].get<double>() ==
        2 * 4 * 8 * 32);
  REQUIRE(ev.by_kind["prune_head_map"].size() == 1);
  StatusOr<std::string> map = ReadFile(ev.by_kind["prune_head_map"][0]["path"]);
  REQUIRE(map.ok());
  Json rows = Json::parse(map.value())["head_maps"];
  REQUIRE(rows.size() == 2);
  CHECK((rows[0] == Json{{"layer", 0}, {"head", 1}, {"role", "pruned"}}));
  CHECK(ev.metrics[metric::kTrainLoss].size() == 6);
  // The final checkpoint restores into a model built from the config.
  const Json& last = ev.by_kind["checkpoint"].back();
  Gpt model(req.config.model);
  auto opt = testing::TwoGroupAdamW(model);
  TrainProgress progress;
  StatusOr<std::string> bytes = ReadFile(last["path"]);
  REQUIRE(bytes.ok());
  CHECK(model->attention(0)->q_proj->weight.size(0) == 32);
  Status s = RestoreCheckpoint(bytes.value(), "ckpt", model, *opt, &progress);
  INFO(s.message());
  REQUIRE(s.ok());
  CHECK(progress.step == 6);
  CHECK(model->attention(0)->q_proj->weight.size(0) == 24);
  CHECK((model->attention(1)->kept_heads() == std::vector<int64_t>{0, 1, 3}));
  testing::RemoveTree(req.out_dir);
}

TEST_CASE("prune hooks: gate-Taylor at a step, resumed after it, is bitwise identical on CPU") {
  const Json prune = {{"prune",
                       {{"method", "gate_taylor"},
                        {"rate", 0.25},
                        {"step", 2},
                        {"calib_sequences", 4},
                        {"calib_batch", 2}}}};
  TrainRequest full = PruneRun("gt_full", prune);
  Events a = Run(full);
  CHECK(a.summary[metric::kPruneHeadsRemoved] == 2);  // round(0.25 * 8)
  CHECK(a.summary[metric::kPruneStep] == 2);
  REQUIRE(a.by_kind["prune_head_map"].size() == 1);
  CHECK(a.by_kind["prune_head_map"][0]["step"] == 2);
  StatusOr<std::string> map = ReadFile(a.by_kind["prune_head_map"][0]["path"]);
  REQUIRE(map.ok());
  // (The parsed document must outlive the loop: a range over a temporary's member dangles.)
  const Json rows = Json::parse(map.value())["head_maps"];
  REQUIRE(rows.size() == 2);
  for (const Json& row : rows) CHECK(row["score"].get<double>() >= 0);
  REQUIRE(a.by_kind["checkpoint"].size() == 2);
  const Json& mid = a.by_kind["checkpoint"][0];
  REQUIRE(mid["step"] == 3);

  TrainRequest cont = PruneRun("gt_cont", prune);
  cont.resume = ResumePoint{mid["path"], mid["sha256"], 3};
  Events b = Run(cont);
  for (int64_t step = 4; step <= 6; ++step)
    CHECK(a.metrics[metric::kTrainLoss].at(step) == b.metrics[metric::kTrainLoss].at(step));
  CHECK(a.summary[metric::kEvalLoss] == b.summary[metric::kEvalLoss]);
  CHECK(b.by_kind["prune_head_map"].empty());  // pruned before the checkpoint
  CHECK(b.summary[metric::kPruneHeadsRemoved] == 2);
  CHECK(a.summary[metric::kPruneParams] == b.summary[metric::kPruneParams]);
  testing::RemoveTree(full.out_dir);
  testing::RemoveTree(cont.out_dir);
}

TEST_CASE("prune hooks: calibration draws its own sequences; the training data do not move") {
  // Rate 0 removes nothing, but the calibration pass and evaluations still run: the
  // training losses must equal a plain run's bit for bit.
  Events plain = Run(PruneRun("plain", Json::object()));
  Events zero = Run(PruneRun("zero", {{"prune", {{"method", "gate_taylor"}, {"rate", 0.0}}}}));
  CHECK(zero.summary[metric::kPruneHeadsRemoved] == 0);
  for (int64_t step = 1; step <= 6; ++step)
    CHECK(plain.metrics[metric::kTrainLoss].at(step) == zero.metrics[metric::kTrainLoss].at(step));
}

// SAF App. C.3.1: "pruning uses exactly the same heads as the variance-selected mean". An
// saf.method replace run with its event at step 0 and a prune.method saf run of the same
// seed (the same model, the same draws) pick the same heads; the second removes them.
TEST_CASE("prune hooks: method saf removes exactly the heads SAF fixes from the same model") {
  const Json saf = {{"rate", 0.25}, {"calib_sequences", 4}, {"calib_batch", 2}, {"fit_steps", 100}};
  Json replace = saf;
  replace["method"] = "replace";
  replace["tau"] = 0.0;
  for (const char* split : {"train", "calib"}) {
    INFO("calibration split " << split);
    Json over = {{"data", {{"calib_fraction", 0.2}}}};
    Json saf_over = {{"saf", replace}}, prune_over = {{"saf", saf}, {"prune", {{"method", "saf"}}}};
    saf_over["saf"]["calib_split"] = split;
    prune_over["saf"]["calib_split"] = split;
    saf_over.merge_patch(over);
    prune_over.merge_patch(over);
    TrainRequest a_req = PruneRun(std::string("saf_fixed_") + split, saf_over);
    TrainRequest b_req = PruneRun(std::string("saf_pruned_") + split, prune_over);
    Events a = Run(a_req), b = Run(b_req);
    CHECK(a.provenance["dataset_calib_tokens"].get<int64_t>() > 0);
    std::vector<std::pair<int64_t, int64_t>> fixed, pruned;
    REQUIRE(a.by_kind["saf_head_map"].size() == 1);
    StatusOr<std::string> event = ReadFile(a.by_kind["saf_head_map"][0]["path"]);
    REQUIRE(event.ok());
    const Json event_json = Json::parse(event.value());
    for (const Json& row : event_json["head_map"])
      if (row["role"] == "fixed") fixed.emplace_back(row["layer"], row["head"]);
    REQUIRE(b.by_kind["prune_head_map"].size() == 1);
    StatusOr<std::string> map = ReadFile(b.by_kind["prune_head_map"][0]["path"]);
    REQUIRE(map.ok());
    const Json map_json = Json::parse(map.value());
    for (const Json& row : map_json["head_maps"]) pruned.emplace_back(row["layer"], row["head"]);
    std::sort(fixed.begin(), fixed.end());
    CHECK(fixed.size() == 2);  // round(0.25 * 8)
    CHECK(pruned == fixed);
    CHECK(b.summary[metric::kPruneHeadsRemoved] == 2);
    CHECK(b.provenance["prune_method"] == "saf");
    testing::RemoveTree(a_req.out_dir);
    testing::RemoveTree(b_req.out_dir);
  }
}

TEST_CASE("prune hooks: bad prune sections are refused naming the field") {
  auto make = [](const Json& overrides) {
    Json config = {{"model", {{"layers", 2}, {"heads", 4}, {"width", 32}}}};
    config.merge_patch(overrides);
    StatusOr<Json> normalized = NormalizeRunConfig(config, "g.json");
    REQUIRE(normalized.ok());
    StatusOr<ExecConfig> c = ExecConfigFromJson(normalized.value(), "g.json");
    REQUIRE(c.ok());
    return MakeMethodHooks(c.value(), normalized.value(), "g.json");
  };
  // A head outside the model is refused with the config, at submit (common/head_list.h).
  Json outside = {{"model", {{"layers", 2}, {"heads", 4}, {"width", 32}}},
                  {"prune", {{"method", "heads"}, {"heads", "2.0"}}}};
  CHECK(NormalizeRunConfig(outside, "g.json").status().message() ==
        "g.json: $.prune.heads: head 2.0 is outside the model's 2 x 4");
  CHECK(make({{"prune", {{"method", "heads"}}}}).status().code() == Status::Code::kInvalidArgument);
  CHECK(make({{"prune", {{"method", "gate_taylor"}, {"heads", "0.1"}}}}).status().code() ==
        Status::Code::kInvalidArgument);
  CHECK(make({{"kind", "mqar"}, {"prune", {{"method", "heads"}, {"heads", "0.1"}}}})
            .status()
            .code() == Status::Code::kInvalidArgument);
  CHECK(make({{"prune", {{"method", "none"}, {"heads", "0.1"}}}})->empty());
  CHECK(make({{"prune", {{"method", "saf"}, {"heads", "0.1"}}}}).status().code() ==
        Status::Code::kInvalidArgument);
}

}  // namespace headlab
